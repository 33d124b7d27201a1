#include "compiler/tune_confirm.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "kiln/session.h"
#include "support/error.h"
#include "tune/tuning_log.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

/// Deterministic inputs: floats in [-1, 1), integers 0 (a valid index for any gather), bools
/// false. Empty when an input's shape is not known from the options' dims.
std::map<std::string, Tensor> model_inputs(const Session& s, const std::map<std::string, int64_t>& dims) {
    std::map<std::string, Tensor> feeds;
    for (const TensorInfo& info : s.inputs()) {
        Shape shape = info.shape;
        for (size_t d = 0; d < shape.size(); ++d) {
            if (shape[d] >= 0) continue;
            auto it = d < info.symbols.size() ? dims.find(info.symbols[d]) : dims.end();
            if (it == dims.end()) return {};
            shape[d] = it->second;
        }
        Tensor t(info.dtype, shape);
        const bool is_float = dtype_is_float(info.dtype);
        for (int64_t i = 0; i < t.numel(); ++i)
            if (is_float) t.set_f64(i, ((i * 7919) % 2000) / 1000.0 - 1.0);
            else t.set_i64(i, 0);
        feeds[info.name] = std::move(t);
    }
    return feeds;
}

SessionOptions session_options(const TuneOptions& opts, const std::string& tuning_log) {
    SessionOptions s;
    s.threads = opts.threads;
    s.dims = opts.dims;
    s.kernels = opts.kernels;
    s.opt_level = opts.opt_level;
    s.executor = ExecutorKind::kSequential;
    s.tuning_log = tuning_log;
    return s;
}

}  // namespace

ModelConfirmation confirm_at_model_level(const std::string& onnx_path, const TuneOptions& opts,
                                         const TuneReport& report, const std::vector<const TunedWorkload*>& changed) {
    ModelConfirmation c;
    if (changed.empty()) {
        c.note = "no workload changed: nothing to confirm";
        return c;
    }
    std::unique_ptr<Session> untuned = Session::load(onnx_path, session_options(opts, "none"));
    std::unique_ptr<Session> tuned = Session::load(onnx_path, session_options(opts, report.log_path));
    std::map<std::string, Tensor> feeds = model_inputs(*untuned, opts.dims);
    if (feeds.empty() && !untuned->inputs().empty()) {
        c.note = "an input has a dimension the options do not give: the model was not confirmed";
        return c;
    }
    untuned->run(feeds);  // compiles and warms both
    tuned->run(feeds);
    std::vector<double> tu, tt;
    for (int i = 0; i < opts.confirm_runs; ++i)
        for (int which = 0; which < 2; ++which) {  // the order alternates, so drift falls on both
            const bool t = (which + i) % 2 == 1;
            auto t0 = Clock::now();
            (t ? tuned : untuned)->run(feeds);
            (t ? tt : tu).push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
    c.ran = true;
    c.untuned_ms = median(tu);
    c.tuned_ms = median(tt);
    c.kept = c.tuned_ms < c.untuned_ms;
    if (c.kept) return c;
    for (const TunedWorkload* w : changed) {
        tune::TuningRecord r;
        r.workload = w->key;
        r.description = w->description;
        r.target = report.target;
        r.threads = opts.threads;
        r.knobs = w->default_knobs;
        r.seconds = c.tuned_ms / 1e3;
        r.time = tune::utc_now();
        r.verdict = "rejected";
        tune::TuningLog::append(report.log_path, r);
    }
    c.note = "the tuned model was slower than the untuned one: " + std::to_string(changed.size()) +
             " workload choice(s) rejected in the log, the defaults stay applied";
    return c;
}

}  // namespace kiln::compiler
