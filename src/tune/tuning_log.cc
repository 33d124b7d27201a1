#include "tune/tuning_log.h"

#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/compile_driver.h"
#include "support/error.h"

namespace kiln::tune {

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
            r.seconds = j.at("seconds").get<double>();
            r.flops = j.value("flops", 0.0);
            r.time = j.value("time", std::string());
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
    std::ofstream f(path, std::ios::app);
    KILN_CHECK(f.good(), kInvalidArgument) << "cannot write the tuning log '" << path << "'";
    nlohmann::json j = {{"v", kTuningLogVersion}, {"workload", r.workload}, {"desc", r.description},
                        {"target", r.target},     {"threads", r.threads},   {"knobs", r.knobs},
                        {"seconds", r.seconds},   {"flops", r.flops},       {"time", r.time}};
    f << j.dump() << "\n";
    f.flush();
    KILN_CHECK(f.good(), kInvalidArgument) << "cannot write the tuning log '" << path << "'";
}

std::optional<TuningRecord> TuningLog::best(const std::string& workload, const std::string& target, int threads) const {
    const TuningRecord* same = nullptr;
    const TuningRecord* any = nullptr;
    for (const TuningRecord& r : records_) {
        if (r.workload != workload || r.target != target) continue;
        if (!any || r.seconds < any->seconds) any = &r;
        if (r.threads == threads && (!same || r.seconds < same->seconds)) same = &r;
    }
    if (same) return *same;
    if (any) return *any;
    return std::nullopt;
}

std::map<std::string, te::KnobValues> TuningLog::best_knobs(const std::string& target, int threads) const {
    std::map<std::string, te::KnobValues> out;
    std::map<std::string, bool> seen;
    for (const TuningRecord& r : records_)
        if (r.target == target && !seen[r.workload]) {
            seen[r.workload] = true;
            out[r.workload] = te::ScheduleConfig::parse(best(r.workload, target, threads)->knobs);
        }
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
