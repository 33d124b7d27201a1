// Profiler: per-step timings of executor runs. An executor asks for a record per run
// (begin_run) and each step writes its own slot (no lock: a step runs once per run). The
// records become a Chrome trace (chrome://tracing, Perfetto) or a summary table.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::runtime {

/// One step's execution: thread (small id), start and duration in ns since the profiler began.
struct StepEvent {
    int tid = -1;  // -1: did not run (an earlier step failed)
    int64_t start_ns = 0;
    int64_t dur_ns = 0;
};

/// The events of one run of one executable.
struct ProfiledRun {
    std::shared_ptr<const Executable> exe;
    std::vector<StepEvent> steps;  // indexed by step
};

class Profiler {
public:
    Profiler();
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;

    /// A record for one run of `exe`; its steps are filled by the executor (one slot per step).
    ProfiledRun* begin_run(std::shared_ptr<const Executable> exe);
    /// ns since the profiler was made.
    int64_t now_ns() const;
    /// A small id of the calling thread (0, 1, 2, ... in order of first use), for traces.
    static int thread_id();

    /// Chrome trace JSON: one "X" event per step per run (name = kernel description, args: node,
    /// shapes, bytes, flops), plus thread-name metadata.
    std::string chrome_trace_json() const;
    /// Writes chrome_trace_json() to `path`; returns an IOError Status on failure.
    Status write_chrome_trace(const std::string& path) const;
    /// A table of the `top` steps by total time: calls, total ms, share %, mean µs, GFLOP/s.
    std::string summary(int top = 15) const;
    size_t num_runs() const;

private:
    std::chrono::steady_clock::time_point origin_;
    mutable std::mutex mu_;
    std::vector<std::unique_ptr<ProfiledRun>> runs_;
};

/// Times one step into `run` (no-op when run is null): construct before, destroy after.
class StepTimer {
public:
    StepTimer(const Profiler* p, ProfiledRun* run, size_t step)
        : p_(p), run_(run), step_(step), start_(run ? p->now_ns() : 0) {}
    ~StepTimer() {
        if (!run_) return;
        StepEvent& e = run_->steps[step_];
        e.tid = Profiler::thread_id();
        e.start_ns = start_;
        e.dur_ns = p_->now_ns() - start_;
    }
    StepTimer(const StepTimer&) = delete;
    StepTimer& operator=(const StepTimer&) = delete;

private:
    const Profiler* p_;
    ProfiledRun* run_;
    size_t step_;
    int64_t start_;
};

}  // namespace kiln::runtime
