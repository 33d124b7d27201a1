// The preemption trace: with KILN_PREEMPT_TRACE=FILE in the server's environment, one line per
// preemption, one per real-time run and one per preempted best-effort run when it finishes are
// appended to FILE (docs/serving.md), to see where the preemption latency and the real-time tail
// go. Each line names its requests and carries steady-clock times (ns), so a test can check the
// order of events without timing thresholds. Off (one getenv, then nothing) otherwise.
#pragma once

#include <string>

#include "kiln/session.h"
#include "serve/request_queue.h"

namespace kiln::serve {

/// The times of one run of a batch on granted cores.
struct RunTimes {
    Clock::time_point asked;     // acquire() called
    Clock::time_point granted;   // acquire() returned
    Clock::time_point returned;  // Session::run returned (before the cores are released)
};

/// `kiln preempt: ...`: request() to the run's stop and to run() returning (us), the batch's
/// request ids, when the stop was asked (asked_ns), and the step that held the stop up
/// (Preemption::State's trace fields). Called after the cores are released, so the write is not
/// part of the measured latency.
void trace_preemption(const std::string& model, const Batch& batch, Preemption& p, int cores,
                      Clock::time_point returned);

/// `kiln rt: ...`: a real-time run's queue wait, its wait for cores and its run (us), its
/// request ids, the earliest arrival among them (arrived_ns) and the run's end (done_ns).
void trace_real_time_run(const std::string& model, const Batch& batch, Clock::duration queued, const RunTimes& t);

/// `kiln be: ...`: a best-effort run that was preempted `preemptions` (> 0) times has finished:
/// its request ids, its first grant (started_ns) and the end of its last part (done_ns).
void trace_preempted_run_done(const std::string& model, const Batch& batch, int preemptions,
                              Clock::time_point started, Clock::time_point done);

}  // namespace kiln::serve
