// fold_constants: evaluates, at compile time, every node whose inputs are all constants and
// replaces its outputs by constants (through PassContext::evaluate: the op's own compute run
// by the tir interpreter, or compiled for large results). Propagation is the forward walk
// itself: a folded result makes its users foldable in the same pass. With
// PassContext::evaluate_all the walk goes in waves: every node foldable now is evaluated in one
// call (a cold compile builds their kernels together), then the nodes their results made
// foldable.
// Not folded: nodes without inputs (generators, random ops: their value is the op's job at run
// time), and results larger than PassContext::fold_max_new_elements unless folding frees at
// least as much constant data (the node is the only user of its constant inputs), so a weight
// is never duplicated into a second copy.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool fold_constants(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
