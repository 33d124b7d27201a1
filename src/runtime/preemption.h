// The runtime's side of kiln::Preemption (include/kiln/session.h): the request flag that
// executors check between kernels and the thread pool checks between chunks of parallel loops,
// and the state of a suspended run (ModelRunner::run keeps it here between its calls).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/session.h"

namespace kiln {
namespace runtime {
struct SuspendedRun;  // model_runner.h
}

struct Preemption::State {
    State();
    ~State();

    /// Set by request(); read by executors and parallel loops (int32_t: the thread pool's loops
    /// read it through runtime::LoopLimits).
    std::atomic<int32_t> requested{0};
    std::atomic<bool> suspended{false};  // read by the scheduler while a run goes on
    /// The suspended run (its executor, bindings and next step); null when not suspended.
    std::unique_ptr<runtime::SuspendedRun> run;

    /// Where the last run() with this object stopped, for tests and logs: the step it resumes
    /// at, and whether it stopped inside that step's kernel (which then runs again).
    size_t resume_step = 0;
    bool cut_inside_kernel = false;
    /// How many times runs with this object were suspended (since construction).
    int suspensions = 0;

    /// For the server's preemption trace (serve/preemption_trace.h): when request() was last
    /// called and when the run last stopped (steady_clock, ns since its epoch), and the step
    /// that held the stop up: the one cut inside, else the last one that finished (its node,
    /// its kernel's description, and whether it may be cut inside; none when the run stopped
    /// before its first step).
    std::atomic<int64_t> requested_at_ns{0};
    int64_t stopped_at_ns = 0;
    std::string stop_node, stop_kernel;
    bool stop_restartable = false;
};

}  // namespace kiln
