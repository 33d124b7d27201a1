// gelu_from_erf: the exact GELU that exporters write out in elementwise ops (PyTorch's F.gelu
// at opsets below 20, Hugging Face's BERT) becomes one Gelu node (opset 20, approximate="none"):
//   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)  ->  Gelu(x)
// (also Mul(x, 1/sqrt 2) for the Div, and either operand order of the commutative ops), where
// no intermediate value is read elsewhere or is a graph output.
//
// Why: the training graph runs it before differentiating. Written out, the forward keeps three
// of its intermediates for the backward pass (the scaled input, the erf + 1 and the product),
// so it ran as three kernels of 1-3 reads and a write each, and the gradient read three saved
// tensors; as Gelu the forward is one pass over x and the gradient (op/defs/elementwise.cc)
// reads x and the output gradient only. Inference needs none of it: there the fused kernels
// (and oneDNN's gelu_erf post-op, topi/dnnl_match.cc) take the written-out form as it is.
#pragma once

#include "ir/graph.h"

namespace kiln::pass {

/// Rewrites every written-out exact GELU of `g` into a Gelu node; returns whether any was.
bool gelu_from_erf(ir::Graph& g);

}  // namespace kiln::pass
