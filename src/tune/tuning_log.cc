#include "tune/tuning_log.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/compile_driver.h"
#include "support/error.h"

namespace kiln::tune {
namespace {

/// The record chooses oneDNN for its unit (the "source" knob at 1: compiler/compile.h's kSourceKnob).
bool chooses_dnnl(const TuningRecord& r) {
    const te::KnobValues v = te::ScheduleConfig::parse(r.knobs);
    auto it = v.find("source");
    return it != v.end() && it->second == 1;
}

}  // namespace

TuningLog TuningLog::read(const std::string& path) {
    TuningLog log;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        try {
            if (j.is_discarded() || j.value("v", 0) != kTuningLogVersion) {
                ++log.skipped_;
                continue;
            }
            TuningRecord r;
            r.workload = j.at("workload").get<std::string>();
            r.description = j.value("desc", std::string());
            r.target = j.at("target").get<std::string>();
            r.threads = j.at("threads").get<int>();
            r.knobs = j.at("knobs").get<std::string>();
            r.space = j.value("space", std::string());
            r.seconds = j.at("seconds").get<double>();
            r.flops = j.value("flops", 0.0);
            r.time = j.value("time", std::string());
            r.verdict = j.value("verdict", std::string());
            te::ScheduleConfig::parse(r.knobs);  // malformed knobs: skipped like any bad line
            if (!(r.seconds > 0)) {
                ++log.skipped_;
                continue;
            }
            log.records_.push_back(std::move(r));
        } catch (const std::exception&) {
            ++log.skipped_;
        }
    }
    return log;
}

void TuningLog::append(const std::string& path, const TuningRecord& r) {
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    // A log cut short mid-line (a crash while writing) gets its line ended first, so that the
    // new record is not glued to the broken one.
    bool ends_open = false;
    {
        std::ifstream in(path, std::ios::binary | std::ios::ate);
        if (in && in.tellg() > 0) {
            in.seekg(-1, std::ios::end);
            ends_open = in.get() != '\n';
        }
    }
    std::ofstream f(path, std::ios::app);
    KILN_CHECK(f.good(), kInvalidArgument) << "cannot write the tuning log '" << path << "'";
    if (ends_open) f << "\n";
    nlohmann::json j = {{"v", kTuningLogVersion}, {"workload", r.workload}, {"desc", r.description},
                        {"target", r.target},     {"threads", r.threads},   {"knobs", r.knobs},
                        {"seconds", r.seconds},   {"flops", r.flops},       {"time", r.time}};
    if (!r.space.empty()) j["space"] = r.space;
    if (!r.verdict.empty()) j["verdict"] = r.verdict;
    f << j.dump() << "\n";
    f.flush();
    KILN_CHECK(f.good(), kInvalidArgument) << "cannot write the tuning log '" << path << "'";
}

std::optional<TuningRecord> TuningLog::best(const std::string& workload, const std::string& target, int threads) const {
    // Per knob setting, the mean of its measurements: a setting timed again (the tuner's
    // confirmation round) is judged by all its times, not by its luckiest one.
    // Only the records after the last model-level rejection of this workload on this target count.
    // Generated settings count only in the space of the newest one (older ones were chosen among
    // another template's choices); a oneDNN choice has no schedule space.
    size_t from = 0;
    std::string space;
    for (size_t i = 0; i < records_.size(); ++i) {
        const TuningRecord& r = records_[i];
        if (r.workload != workload || r.target != target) continue;
        if (r.verdict == "rejected") from = i + 1;
        if (r.verdict.empty() && !chooses_dnnl(r)) space = r.space;
    }
    auto pick = [&](bool same_threads) -> std::optional<TuningRecord> {
        std::map<std::string, std::pair<double, int>> sum;  // knobs -> (sum of seconds, count)
        std::map<std::string, const TuningRecord*> last;
        for (size_t i = from; i < records_.size(); ++i) {
            const TuningRecord& r = records_[i];
            if (!r.verdict.empty() || r.workload != workload || r.target != target ||
                (same_threads && r.threads != threads) || (!chooses_dnnl(r) && r.space != space))
                continue;
            auto& [s, n] = sum[r.knobs];
            s += r.seconds;
            ++n;
            last[r.knobs] = &r;
        }
        std::optional<TuningRecord> best;
        for (const auto& [knobs, sn] : sum) {
            const double mean = sn.first / sn.second;
            if (!best || mean < best->seconds) {
                best = *last[knobs];
                best->seconds = mean;
            }
        }
        return best;
    };
    if (auto b = pick(true)) return b;
    return pick(false);
}

std::map<std::string, te::TunedKnobs> TuningLog::best_knobs(const std::string& target, int threads) const {
    std::map<std::string, te::TunedKnobs> out;
    std::map<std::string, bool> seen;
    for (const TuningRecord& r : records_)
        if (r.target == target && !seen[r.workload]) {
            seen[r.workload] = true;
            if (auto b = best(r.workload, target, threads))
                out[r.workload] = {te::ScheduleConfig::parse(b->knobs), b->space};
        }
    return out;
}

std::vector<std::string> TuningLog::targets() const {
    std::vector<std::string> out;
    for (const TuningRecord& r : records_)
        if (std::find(out.begin(), out.end(), r.target) == out.end()) out.push_back(r.target);
    return out;
}

std::string default_tuning_log_path() { return (std::filesystem::path(codegen::cache_dir()) / "tuning.jsonl").string(); }

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace kiln::tune
