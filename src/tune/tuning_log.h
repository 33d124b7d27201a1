// The tuning log: JSON lines, one measured candidate per line, keyed by workload and target.
//
//   {"v":1,"workload":"w3f2a...","desc":"KilnConv2dNCHWc+Relu f32[1,4,56,56,16]...","target":"AMD ... | avx512",
//    "threads":2,"knobs":"conv.ob=2,conv.t=7,source=0","space":"9c0e...","seconds":0.000412,"flops":2.3e8,
//    "time":"2026-11-23T10:00:00Z"}
//
// "space" is te::space_fingerprint of the schedule the knobs were lowered in: compile() applies a
// generated setting only where the current templates lower it in the same space (a template
// changed since: the workload runs untuned, and the compile says so), and a workload's generated
// records count only in the space of its newest one.
// Only candidates that ran and matched the reference are written (a crashing, hanging or wrong
// candidate never reaches the log). A line with "verdict":"rejected" is not a measurement: the
// tuner's model-level check found the whole model slower with this workload's tuned choice (a
// kernel that wins alone can lose among its neighbours), so the records of that workload and
// target before the verdict are no longer applied (a later search may win again). `kiln run`, the Session and `kiln tune --resume` read it;
// the best record per (workload, target) is the one compile() applies: the knob setting with
// the lowest mean time at the same thread count, else at any.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "te/schedule_config.h"

namespace kiln::tune {

constexpr int kTuningLogVersion = 1;

struct TuningRecord {
    std::string workload;     // the workload key (compiler/workload.h)
    std::string description;  // what it is, for people reading the log
    std::string target;       // Measurer::target()
    int threads = 1;
    std::string knobs;        // te::ScheduleConfig::format of the knob values
    std::string space;        // te::space_fingerprint of its schedule ("": written before fingerprints)
    double seconds = 0;       // median time of one call
    double flops = 0;
    std::string time;         // when measured (UTC, ISO 8601)
    /// "" for a measurement; "rejected" for the model-level verdict (knobs: the default's,
    /// seconds: the tuned model's median time).
    std::string verdict;
};

class TuningLog {
public:
    /// Reads `path` (a missing file is an empty log). Lines of another version or malformed lines
    /// are skipped and counted (skipped()); never an error, so a log cut short by a crash reads.
    static TuningLog read(const std::string& path);
    /// Appends one record as a line and flushes it (creating the file and its directory).
    static void append(const std::string& path, const TuningRecord& r);

    void add(TuningRecord r) { records_.push_back(std::move(r)); }
    const std::vector<TuningRecord>& records() const { return records_; }
    int skipped() const { return skipped_; }

    /// The best record of `workload` on `target`: the knob setting with the lowest mean time at
    /// `threads`, else at any thread count (seconds = that mean).
    std::optional<TuningRecord> best(const std::string& workload, const std::string& target, int threads) const;
    /// Every workload's best knob values on `target` and their space (what compile() applies).
    std::map<std::string, te::TunedKnobs> best_knobs(const std::string& target, int threads) const;
    /// The targets with records in the log (to tell a log from another machine).
    std::vector<std::string> targets() const;

private:
    std::vector<TuningRecord> records_;
    int skipped_ = 0;
};

/// The default log: tuning.jsonl in the kernel cache directory (codegen::cache_dir()).
std::string default_tuning_log_path();

/// Current UTC time as ISO 8601 ("2026-11-23T10:00:00Z").
std::string utc_now();

}  // namespace kiln::tune
