// lower_einsum: a two-input Einsum that is a (batched) matrix product — every label either in
// both inputs and the output (batch), in one input and the output (rows of A, columns of B), or
// in both inputs and not the output (the contraction) — becomes Transpose + Reshape + MatMul +
// Reshape + Transpose, which run as the packed/oneDNN matrix products instead of one generic
// reduction (attention's "bhqd,bhkd->bhqk" ran 48x ONNX Runtime). Static shapes only; an
// ellipsis, a repeated label (a diagonal) or a label summed out of one input keeps the Einsum.
// The transposes and reshapes it adds are left for simplify_algebra (which runs after it) to
// merge or drop when they are identities.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool lower_einsum(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
