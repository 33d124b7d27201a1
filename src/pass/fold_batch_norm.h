// fold_batch_norm: folds an inference BatchNormalization, or a per-channel constant Mul/Add,
// that follows a Conv or a Gemm (its only user) into the weights and bias:
//   BN(conv(x, W, b)) = conv(x, W * s[m], (b - mean) * s + B),  s = scale / sqrt(var + eps)
//   conv(x, W, b) * c[m] = conv(x, W * c[m], b * c[m]),   conv(x, W, b) + c[m] = conv(x, W, b + c[m])
// and likewise for Gemm(A, B, C) = alpha*A*B + beta*C along its output columns (B scaled per
// column, the new bias beta*C folded with beta set to 1).
// The new weights are written as constant-only nodes (Mul, Div, Sqrt, ...) that fold_constants
// evaluates through the ops' own computes (STYLE rule 7), so the pass does no arithmetic itself.
// Needs constant W, bias and BN parameters of the Conv's dtype; anything else is left alone.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool fold_batch_norm(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
