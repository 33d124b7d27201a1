// The default GPU schedule (codegen/cuda_emitter.h launches what it binds).
//
// Every materialized stage gets one thread per output element: its data-parallel axes are fused
// into one loop, split by the block size (cuda_block_size) and the halves bound to blockIdx.x
// and threadIdx.x; a
// reduction's axes stay serial inside the thread. Consecutive threads take consecutive
// elements of the innermost axis, so a matmul's B rows and an elementwise kernel's operands are
// read coalesced. Fused elementwise chains are already inlined by the caller (the CPU fusion's
// units), so injective kernels, their epilogues and reductions (softmax's max/sum stages, layer
// norm's mean/variance) all take this one schedule. No shared-memory tiling yet (docs/gpu.md).
#pragma once

#include <cstdint>

#include "te/schedule.h"

namespace kiln::topi {

inline constexpr int64_t kCudaThreads = 256;

/// Threads per block for `extent` elements: all of them up to kCudaThreads, else a divisor of
/// the extent in [kCudaThreads/2, kCudaThreads] when there is one (no partial tail block, which
/// lowering would give a launch of its own), else kCudaThreads.
int64_t cuda_block_size(int64_t extent);

/// Binds every non-inlined stage of `sch` as above (a stage without data-parallel axes, a
/// scalar, runs on one thread).
void cuda_default_schedule(te::Schedule& sch);

}  // namespace kiln::topi
