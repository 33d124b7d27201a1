// The LayerNorm that opset < 17 exporters write out (PyTorch's nn.LayerNorm at opset 14):
//
//   mean = ReduceMean(x, [-1]); d = x - mean; v = ReduceMean(d ^ 2, [-1])
//   y = d / Sqrt(v + eps) * gamma + beta
//
// becomes one LayerNormalization(x, gamma, beta) {axis = -1, epsilon = eps}: one kernel that
// reads x twice instead of three fused groups (on the real all-MiniLM-L6-v2, 8% of a warm call at
// batch 8, seq 128 went to the decomposed form). Symbolic compiles only (docs/dynamic_shapes.md),
// where LayerNormalization has a symbolic-row kernel; the per-shape path is unchanged.
#pragma once

#include "ir/graph.h"

namespace kiln::compiler {

/// Rewrites every decomposed LayerNorm over the last axis (float32; gamma and beta constants of
/// the last dim's size; each intermediate used only inside the pattern). Returns how many.
int fuse_decomposed_layer_norms(ir::Graph& g);

}  // namespace kiln::compiler
