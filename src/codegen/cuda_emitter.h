// The CUDA emitter: prints a tir PrimFunc as CUDA C for NVRTC (codegen/nvrtc_compile.h).
//
// Lowering gives a kernel as Allocates (one per materialized intermediate stage) around a
// sequence of stage loop nests. On a GPU the stages need a grid-wide barrier between them, so
// each top-level nest becomes its own __global__ entry `<name>_s<k>`, launched in order on one
// stream; the intermediates become scratch buffers the runtime allocates and passes after the
// kernel's parameters. Every entry takes every buffer (params, then scratch) so a launch's
// arguments are the same list.
//
// Loops bound with Stage::bind become the thread's index: `for v in 0..E blockIdx.x` is
// `const int64_t v = blockIdx.x; if (v < E) { ... }`, and the entry's launch is gridDim.x /
// blockDim.x = the largest extent bound to each (a nest binds nothing: one thread); a reduction
// with long rows and few outputs becomes one warp per output (CudaEmitOptions). Other loops
// stay serial loops (`unrolled` gets `#pragma unroll`). Expressions come from the C printer
// (c_expr_printer.h) and the prelude is the C one as __device__ helpers (cuda_prelude.h), so the
// CUDA kernel computes what the C kernel computes. Static shapes only; a kernel-local register
// tile (Stage::cache_write_local) becomes a local array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tir/stmt.h"

namespace kiln::codegen {

struct CudaLaunch {
    std::string entry;      // the __global__ function's name
    int64_t grid = 1;       // gridDim.x
    int64_t block = 1;      // blockDim.x
};

struct CudaKernel {
    std::string source;                  // one CUDA translation unit
    std::vector<CudaLaunch> launches;    // in order
    std::vector<size_t> scratch_bytes;   // per intermediate, passed after the params
    std::vector<std::string> scratch_names;
};

struct CudaEmitOptions {
    /// A reduction over 32+ elements for at most 65536 outputs, lowered with one thread per
    /// output, is printed with one warp per output instead (lanes stride over the sum, then
    /// shuffle). False: as lowered (the CUDA emulation test runs threads one at a time, which
    /// cannot emulate a shuffle).
    bool warp_reductions = true;
    /// Best-effort kernels cut at thread-block boundaries (REEF's reset-based preemption of
    /// idempotent kernels): every entry takes two more parameters after the scratch buffers,
    /// `const volatile int* kiln_stop` and `int* kiln_cut`. Thread 0 of each block reads the
    /// stop flag into shared memory as the block starts; a block that finds it set computes
    /// nothing, and one of its threads sets *kiln_cut. The blocks that started before the flag
    /// was set finish, so the entry is cut at a block boundary; the runner finds the first entry
    /// whose cut flag is set and runs it again from its first block (an entry never reads what
    /// it writes, so recomputing its finished blocks gives the same values).
    bool stop_flag = false;
};

/// kUnsupported for a symbolic kernel or a loop bound to an index with a non-constant extent.
CudaKernel emit_cuda(const tir::PrimFunc& f, const CudaEmitOptions& opts = {});

}  // namespace kiln::codegen
