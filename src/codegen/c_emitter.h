// The C emitter: prints a tir PrimFunc as a self-contained C11 translation unit exporting
//   int32_t <func.name>(void* const* args, const kiln_kernel_env* env)
// (runtime/kernel_abi.h), or, for a kernel with symbolic dims (PrimFunc::dims),
//   int32_t <func.name>(void* const* args, const int64_t* dims, const kiln_kernel_env* env)
// (kiln_kernel_dims_fn), which reads the dims into locals and returns KILN_KERNEL_BAD_DIMS for a
// negative one; strides, loop extents and allocation sizes are then C expressions of them. Parallel loops become a task function over a context struct of the
// captured variables, run through env->parallel_for; vectorized loops get `#pragma GCC ivdep`
// (no OpenMP); unrolled loops `KILN_UNROLL(n)` (`#pragma GCC unroll n`). f16/bf16 buffers are uint16_t converted by
// inline helpers. Kernel-local Allocates are heap buffers; a failed allocation returns 1.
// func.name must be a C identifier (it is the exported symbol); compile with the flags of
// compile_driver.h (-fwrapv is relied on for wrapping integer arithmetic).
#pragma once

#include <string>

#include "tir/stmt.h"

namespace kiln::codegen {

std::string emit_c(const tir::PrimFunc& f);

}  // namespace kiln::codegen
