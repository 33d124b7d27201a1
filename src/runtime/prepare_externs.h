// A run at new dims makes its extern kernels together, before its first step (issue 23).
//
// On symbolic shapes a oneDNN convolution is made per run-time shape (extern_at_shapes.h): its
// primitive, its blocking and thread split, the weights' copy in the layout it chose. Made one
// by one as the steps reach them, a first call at new dims spent most of its time there
// (PP-OCRv4's recogniser: 34 convolutions, about 16 ms of 46 for the first call, 5 ms warm).
// Made before the first step, the kernels are made in parallel on the run's intra-op threads
// (each claims the next kernel to make), and the steps then find them ready.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime {

/// Makes the kernel of every extern step that takes dims at the run's `dims` (Executable::dims
/// order) for the thread count of `env`, on the threads of `env`. A kernel that cannot be made
/// is left to its step, which reports the error with its node's name.
void prepare_externs_at(const Executable& exe, const std::vector<int64_t>& dims, const kiln_kernel_env& env);

}  // namespace kiln::runtime
