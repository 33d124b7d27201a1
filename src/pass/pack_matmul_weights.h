// pack_matmul_weights: rewrites a float32 MatMul or Gemm whose B is a constant into
// KilnMatMulPackedB over B packed at compile time:
//   MatMul(A, B)                      -> KilnMatMulPackedB(A, Bp) {n=N}
//   Gemm(A, B, C) {alpha, beta, transB} -> KilnMatMulPackedB(A, Bp, C) {n=N, alpha, beta}
// with Bp[N/nb, K, nb] = Transpose(Reshape(B, [K, N/nb, nb]), [1, 0, 2]) (transB=1:
// Transpose(Reshape(B, [N/nb, nb, K]), [0, 2, 1])); when nb does not divide N, B' is first
// padded with zero columns (a Concat) to ceil(N/nb) blocks. All are constant-only nodes that
// fold_constants evaluates right after, so `kiln inspect` shows the packing. nb is the
// micro-kernel's tile width (op/defs/linear_util.h matmul_packed_block): every k step of the
// kernel reads nb contiguous floats and a transposed-B Gemm never reads with a stride of K.
// Preconditions: static types. Left alone: transA=1, A of rank < 2, B of rank != 2, non-f32.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool pack_matmul_weights(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
