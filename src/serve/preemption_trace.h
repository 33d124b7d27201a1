// The preemption trace: with KILN_PREEMPT_TRACE=FILE in the server's environment, one line per
// preemption and one per real-time run are appended to FILE (docs/serving.md), to see where the
// preemption latency and the real-time tail go. Off (one getenv, then nothing) otherwise.
#pragma once

#include <string>

#include "kiln/session.h"
#include "serve/pending_request.h"

namespace kiln::serve {

/// `kiln preempt: ...`: request() to the run's stop and to run() returning at `returned` (us),
/// and the step that held the stop up (Preemption::State's trace fields). Called after the
/// cores are released, so the write is not part of the measured latency.
void trace_preemption(const std::string& model, Preemption& p, int cores, Clock::time_point returned);

/// `kiln rt: ...`: a real-time run's queue wait, its wait for cores and its run (us).
void trace_real_time_run(const std::string& model, Clock::duration queued, Clock::duration acquire,
                         Clock::duration run);

}  // namespace kiln::serve
