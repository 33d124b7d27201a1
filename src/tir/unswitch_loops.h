// unswitch_loops: a select whose condition is fixed for a whole loop body is hoisted out of it.
//
// A Concat along the channels of an NCHWc tensor, fused with what follows it (DenseNet's
// BatchNorm + ReLU) into the parallel loop over (channel block, row), reads
// select(c < 4, in0[...], select(c < 6, in1[...], ...)) for every element: every input is
// loaded through a clamped index and all but one thrown away, so a Concat of 25 inputs costs 25
// loads per element. The condition reads only the outer loop's variable, so within the loop's
// body it is constant: the body becomes `if (cond) body[select -> t] else body[select -> f]`,
// repeatedly (selects with the same condition go together), and each copy reads one input in
// plain loops. Applied to the body of every parallel loop that holds another loop, for
// conditions that read the loop's own variable but no variable bound inside the body and no
// memory (a condition on the dims alone is left: it splits nothing that varies); at most kMaxCopies (64)
// copies of one body. Run after the first simplify (conditions in `x < c` form), before partition_loops.
#pragma once

#include "tir/stmt.h"

namespace kiln::tir {

PrimFunc unswitch_loops(PrimFunc f);

}  // namespace kiln::tir
