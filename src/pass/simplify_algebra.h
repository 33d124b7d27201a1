// simplify_algebra: local rewrites that remove work without changing results.
//  - no-ops: Identity; Dropout in inference (mask unused); Cast to the input's dtype;
//    x*1, 1*x, x/1, x+0, 0+x, x-0, x^1 when the constant does not widen the result's type;
//  - data movement: Transpose(Transpose(x)) -> one Transpose (none if the permutations
//    cancel); chains of Reshape/Flatten/Squeeze/Unsqueeze -> one Reshape to the final static
//    shape (none if it equals x's shape);
//  - reassociation with constants: (x + c1) + c2 -> x + (c1 + c2) and (x * c1) * c2 ->
//    x * (c1 * c2), when the inner node has no other user; the new constant-only node is left
//    for fold_constants (which runs after this pass in the pipeline).
// Every rewrite keeps graph output names (pass/rewrite.h). Repeats until nothing applies.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool simplify_algebra(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
