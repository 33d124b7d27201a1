// The C emitter: prints a tir PrimFunc as a C99 translation unit exporting
//   int32_t <func.name>(void* const* args, const kiln_kernel_env* env)
// (runtime/kernel_abi.h). Parallel loops become a task function over a context struct of the
// captured variables, run through env->parallel_for; vectorized loops get `#pragma omp simd`
// -free hints (GCC ivdep); unrolled loops `#pragma GCC unroll`. f16/bf16 buffers are uint16_t
// converted by inline helpers.
#pragma once

#include <string>

#include "tir/stmt.h"

namespace kiln::codegen {

std::string emit_c(const tir::PrimFunc& f);

}  // namespace kiln::codegen
