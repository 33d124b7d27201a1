// The runtime's side of kiln::Preemption (include/kiln/session.h): the request flag that
// executors check between kernels and the thread pool checks between chunks of parallel loops,
// and the state of a suspended run.
#pragma once

#include <atomic>
#include <cstdint>

#include "kiln/session.h"

namespace kiln {

struct Preemption::State {
    /// Set by request(); read by executors and parallel loops (int32_t: generated C kernels read
    /// it through kiln_kernel_env).
    std::atomic<int32_t> requested{0};
    bool suspended = false;
};

}  // namespace kiln
