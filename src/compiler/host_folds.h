// Constant folds computed directly on the host, without generating, compiling and loading a
// kernel: the weight rewrites every model load repeats (a transpose into a blocked layout, a
// BatchNorm scale multiplied into a conv's weights, weights concatenated for one product). A
// cold load compiled each such fold (tens of milliseconds apiece, wave after wave of folds that
// feed one another: about half a second of PP-OCR's first call); these loops take milliseconds.
//
// Results equal the generated kernel's bit for bit: Transpose and Concat move bytes, and the
// arithmetic is one IEEE operation per element (no reassociation, no contraction).
#pragma once

#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::compiler {

/// Computes node `n` (every input constant, its one output static) into `out` (allocated with
/// the output's dtype and shape) when it is a Transpose or a Concat (any dtype but strings), or
/// an Add, Sub, Mul or Div of f32 tensors with numpy broadcasting. false, with `out` untouched,
/// for anything else (the caller compiles or interprets it).
bool run_host_fold(const ir::Node& n, Tensor& out);

}  // namespace kiln::compiler
