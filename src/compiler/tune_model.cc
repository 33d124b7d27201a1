#include "compiler/tune_model.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "compiler/workload.h"
#include "runtime/extern_kernel.h"
#include "support/error.h"
#include "tune/search.h"
#include "tune/task_scheduler.h"
#include "tune/tuning_log.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kFailed = std::numeric_limits<double>::infinity();

/// One workload under search: its representative unit, its generated space and searcher, and
/// the oneDNN alternative (when one matches).
struct Workload {
    const KernelUnit* unit = nullptr;
    WorkloadResult result;
    std::vector<tune::ArgSpec> args;
    std::optional<topi::ExternChoice> dnnl;
    bool default_is_dnnl = false;
    std::vector<te::Knob> space;
    std::unique_ptr<tune::Searcher> searcher;
    /// Per logged knob string: the sum and count of its successful times (a setting measured
    /// again is judged by its mean, as the log's best record is), and its schedule knobs.
    std::map<std::string, std::pair<double, int>> times;
    std::map<std::string, std::optional<te::KnobValues>> setting;  // nullopt = oneDNN
    bool confirmed = false;
};

double mean(const std::pair<double, int>& sum_count) { return sum_count.first / sum_count.second; }

/// The knob string a candidate is logged under: its schedule knobs plus the source knob when
/// the unit has a oneDNN alternative (so that compile() keeps the generated kernel).
std::string logged_knobs(const Workload& w, te::KnobValues v, bool dnnl) {
    if (dnnl) return std::string(kSourceKnob) + "=1";
    if (w.dnnl) v[kSourceKnob] = 0;
    return te::ScheduleConfig::format(v);
}

/// A generated candidate and the fingerprint of the space its knobs were lowered in.
std::pair<tune::Candidate, std::string> generated_candidate(const Workload& w, const te::KnobValues& v) {
    LoweredKernel k = lower_unit(*w.unit, false, v);
    tune::Candidate c;
    c.knobs = logged_knobs(w, k.knobs, false);
    c.source = std::move(k.source);
    return {std::move(c), te::space_fingerprint(k.space)};
}

tune::Candidate dnnl_candidate(const Workload& w) {
    tune::Candidate c;
    c.knobs = logged_knobs(w, {}, true);
    c.extern_name = w.dnnl->name;
    c.extern_params = runtime::ExternParams::format(w.dnnl->params);
    return c;
}

/// Strips the source knob: what the searcher's space knows.
te::KnobValues schedule_knobs(te::KnobValues v) {
    v.erase(kSourceKnob);
    return v;
}

/// The candidates of one measurement round and, per candidate, its schedule knobs (nullopt:
/// the oneDNN kernel).
struct Round {
    tune::MeasureTask task;
    std::vector<std::optional<te::KnobValues>> what;
    std::vector<std::string> space;  // per candidate: its record's knob-space fingerprint
    void add(const Workload& w, std::optional<te::KnobValues> v) {
        if (v) {
            auto [c, fingerprint] = generated_candidate(w, *v);
            task.candidates.push_back(std::move(c));
            space.push_back(std::move(fingerprint));
        } else {
            task.candidates.push_back(dnnl_candidate(w));
            space.push_back(te::space_fingerprint(w.space));  // the generated kernel's, which oneDNN replaces
        }
        what.push_back(std::move(v));
    }
};

Round new_round(const Workload& w) {
    Round r;
    r.task.workload = w.result.description;
    r.task.args = w.args;
    r.task.flops = w.result.flops;
    return r;
}

class Tuner final : public tune::TuningTasks {
public:
    Tuner(const TuneOptions& opts, tune::Measurer& m) : opts_(opts), measurer_(m), start_(Clock::now()) {
        KILN_CHECK(!opts.log_path.empty(), kInvalidArgument) << "tune: no tuning log path given";
        KILN_CHECK(opts.batch >= 1 && opts.budget_seconds >= 0, kInvalidArgument)
            << "tune: batch must be >= 1 and the budget >= 0 s, got " << opts.batch << " and " << opts.budget_seconds;
        target_ = measurer_.target();
    }

    TuneResult run(ir::Graph& g) {
        optimize_graph(g, opts_.compile);
        units_ = partition_kernels(g);
        collect(g);
        if (opts_.resume) resume();
        tune::BudgetOptions budget;
        budget.budget_seconds = opts_.budget_seconds;
        budget.batch = opts_.batch;
        budget.elapsed = [this] { return elapsed(); };
        const std::vector<size_t> order = tune::spend_budget(*this, budget);
        TuneResult out;
        out.target = target_;
        for (size_t i : order) out.workloads.push_back(finish(workloads_[i]));
        out.seconds = elapsed();
        return out;
    }

    // tune::TuningTasks: the scheduler (tune/task_scheduler.h) spends the budget over the workloads.
    size_t size() const override { return workloads_.size(); }
    bool done(size_t i) const override {
        const Workload& w = workloads_[i];
        if (!w.searcher) return true;
        return w.searcher->exhausted() || w.searcher->trials() >= opts_.max_trials || w.searcher->converged(opts_.patience);
    }
    double weight(size_t i) const override {
        return finish(workloads_[i]).default_seconds * workloads_[i].result.count;
    }

private:
    double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

    void collect(const ir::Graph& g) {
        std::map<std::string, size_t> index;
        for (const KernelUnit& unit : units_) {
            if (is_view_unit(unit, g, opts_.compile.opt_level)) continue;
            const std::string key = workload_key(unit);
            auto it = index.find(key);
            if (it != index.end()) {
                ++workloads_[it->second].result.count;
                continue;
            }
            Workload w;
            w.unit = &unit;
            w.result.key = key;
            w.result.description = workload_description(unit);
            w.result.count = 1;
            w.result.flops = unit_flops(unit);
            if (runtime::have_dnnl()) w.dnnl = topi::match_dnnl(unit.nodes, unit.inputs, unit.outputs);
            w.default_is_dnnl = extern_choice(unit, opts_.compile.kernels, {}, opts_.compile.intra_op_threads).has_value();
            te::KnobValues defaults;
            try {
                LoweredKernel k = lower_unit(unit, false, {}, nullptr, opts_.compile.intra_op_threads);
                w.space = std::move(k.space);
                defaults = std::move(k.knobs);
            } catch (const Error&) {
                continue;  // not a generated kernel (the graph compiles it some other way)
            }
            if (w.space.empty() && !w.dnnl) continue;  // nothing to choose
            w.searcher = std::make_unique<tune::Searcher>(w.space, opts_.seed + workloads_.size());
            w.args = workload_args(unit);
            w.result.default_knobs = logged_knobs(w, defaults, w.default_is_dnnl);
            index[key] = workloads_.size();
            workloads_.push_back(std::move(w));
        }
    }

    /// Seeds each searcher with the log's records of its workload on this target.
    void resume() {
        tune::TuningLog log = tune::TuningLog::read(opts_.log_path);
        std::map<std::string, Workload*> by_key;
        for (Workload& w : workloads_) by_key[w.result.key] = &w;
        for (const tune::TuningRecord& r : log.records()) {
            auto it = by_key.find(r.workload);
            if (!r.verdict.empty() || it == by_key.end() || r.target != target_ || r.threads != opts_.measure.threads)
                continue;
            Workload& w = *it->second;
            te::KnobValues v = te::ScheduleConfig::parse(r.knobs);
            auto src = v.find(kSourceKnob);
            const bool dnnl = src != v.end() && src->second == 1;
            if (!dnnl && !in_current_space(w, r, schedule_knobs(v))) continue;  // another template's choice
            note(w, r.knobs, dnnl ? std::nullopt : std::optional<te::KnobValues>(schedule_knobs(v)), r.seconds);
            if (!dnnl) w.searcher->record(schedule_knobs(v), r.seconds);
        }
    }

    /// The record's knobs lower in the space it was measured in (a template unchanged since).
    bool in_current_space(const Workload& w, const tune::TuningRecord& r, const te::KnobValues& v) {
        auto [it, fresh] = resumed_space_.try_emplace(w.result.key + " " + r.knobs);
        if (fresh) {
            try {
                it->second = te::space_fingerprint(lower_unit(*w.unit, false, v).space);
            } catch (const Error&) {
                it->second.clear();  // the knobs no longer lower at all
            }
        }
        return !it->second.empty() && it->second == r.space;
    }

    /// One measurement round of workload i: the reference first, then up to `n` candidates.
    void round(size_t i, int n) override {
        Workload& w = workloads_[i];
        Round r = new_round(w);
        try {
            r.add(w, w.default_is_dnnl ? std::nullopt : std::optional<te::KnobValues>(te::KnobValues{}));
            if (w.dnnl && !w.default_is_dnnl && !w.setting.count(logged_knobs(w, {}, true))) r.add(w, std::nullopt);
            const int room = n - static_cast<int>(r.task.candidates.size() - 1);
            for (const te::KnobValues& v : w.searcher->propose(std::max(0, room))) r.add(w, v);
        } catch (const Error&) {
            // A knob value the lowering rejects: the template's space is wrong; skip the workload.
            w.result.failures += 1;
            w.searcher.reset();
            return;
        }
        measure_and_log(w, r, true, opts_.measure);
        if (opts_.progress) {
            TuneProgress p;
            p.workload = static_cast<int>(i) + 1;
            p.workloads = static_cast<int>(workloads_.size());
            p.description = w.result.description;
            p.trials = w.result.trials;
            double best = best_seconds(w).second;
            p.best_gflops = best < kFailed && best > 0 ? w.result.flops / best * 1e-9 : 0;
            p.elapsed = elapsed();
            p.budget = opts_.budget_seconds;
            opts_.progress(p);
        }
    }

    void note(Workload& w, const std::string& knobs, std::optional<te::KnobValues> v, double seconds) {
        auto& [sum, n] = w.times[knobs];
        sum += seconds;
        ++n;
        w.setting[knobs] = std::move(v);
    }

    /// Measures a round (candidates[0] the reference), logs and notes every success; feeds the
    /// searcher when `search` (a search round, not a confirmation).
    void measure_and_log(Workload& w, const Round& round, bool search, const tune::MeasureOptions& mopts) {
        const tune::MeasureTask& task = round.task;
        const auto& what = round.what;
        std::vector<tune::MeasureResult> res = measurer_.measure(task, mopts);
        for (size_t k = 0; k < res.size(); ++k) {
            const double s = res[k].ok ? res[k].seconds : kFailed;
            if (!res[k].ok) {
                w.result.failures += 1;
                if (w.result.first_failure.empty()) w.result.first_failure = task.candidates[k].knobs + ": " + res[k].error;
            }
            if (k > 0 && search) {
                w.result.trials += 1;
                if (what[k]) w.searcher->record(*what[k], s);
            }
            if (!res[k].ok) continue;
            // The reference is logged too (it runs in every round, each other candidate is
            // checked against it): the log's best record is never worse than the default.
            note(w, task.candidates[k].knobs, what[k], s);
            tune::TuningRecord r;
            r.workload = w.result.key;
            r.description = w.result.description;
            r.target = target_;
            r.threads = mopts.threads;
            r.knobs = task.candidates[k].knobs;
            r.space = round.space[k];
            r.seconds = s;
            r.flops = w.result.flops;
            r.time = tune::utc_now();
            tune::TuningLog::append(opts_.log_path, r);
        }
    }

    /// A workload's last round: its best few settings and the alternative source measured again
    /// with twice the repeats, so that a lucky single time does not pick the winner.
    void confirm(size_t i) override {
        Workload& w = workloads_[i];
        if (w.confirmed || w.times.size() < 2) return;
        w.confirmed = true;
        std::vector<std::pair<double, std::string>> ranked;
        for (const auto& [knobs, sn] : w.times) ranked.push_back({mean(sn), knobs});
        std::sort(ranked.begin(), ranked.end());
        Round r = new_round(w);
        r.add(w, w.setting.at(w.result.default_knobs));
        for (size_t k = 0; k < ranked.size() && r.task.candidates.size() < 4; ++k)
            if (ranked[k].second != w.result.default_knobs) r.add(w, w.setting.at(ranked[k].second));
        tune::MeasureOptions mopts = opts_.measure;
        mopts.repeats *= 2;
        measure_and_log(w, r, false, mopts);
    }

    /// The best candidate so far: (its logged knobs, seconds).
    std::pair<std::string, double> best_seconds(const Workload& w) const {
        std::pair<std::string, double> best = {"", kFailed};
        for (const auto& [knobs, sn] : w.times)
            if (mean(sn) < best.second) best = {knobs, mean(sn)};
        return best;
    }

    WorkloadResult finish(const Workload& w) const {
        WorkloadResult r = w.result;
        auto d = w.times.find(r.default_knobs);
        r.default_seconds = d != w.times.end() ? mean(d->second) : 0;
        auto [knobs, s] = best_seconds(w);
        if (s < kFailed && (r.default_seconds == 0 || s < r.default_seconds)) {
            r.best_seconds = s;
            r.best_knobs = knobs;
        } else {
            r.best_seconds = r.default_seconds;
            r.best_knobs = r.default_knobs;
        }
        return r;
    }

    const TuneOptions& opts_;
    tune::Measurer& measurer_;
    Clock::time_point start_;
    std::string target_;
    std::vector<KernelUnit> units_;
    std::vector<Workload> workloads_;
    std::map<std::string, std::string> resumed_space_;  // "workload knobs" -> its space fingerprint now
};

}  // namespace

TuneResult tune_graph(ir::Graph& g, const TuneOptions& opts, tune::Measurer& measurer) {
    return Tuner(opts, measurer).run(g);
}

}  // namespace kiln::compiler
