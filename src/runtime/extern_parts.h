// Runs the parts of an extern kernel's step (extern_split.h plans them: bands of rows, output
// channels or images) on the kernel env's intra-op pool.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/kernel_abi.h"
#include "support/status.h"

namespace kiln::runtime {

/// Calls run_part(i) for every i in [0, n), spread over env's pool; the first failing part's
/// Status (the others still run), else ok. A preemptible loop may stop handing out parts: the
/// caller checks env.stop afterwards (run_control.h).
Status run_extern_parts(const kiln_kernel_env& env, int64_t n, const std::function<Status(int64_t)>& run_part);

}  // namespace kiln::runtime
