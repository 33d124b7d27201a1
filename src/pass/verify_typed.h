// The typed verifier the pass manager runs after every pass: ir::verify_graph (SSA, every use
// after its definition, user lists) plus what needs the op registry — every node names a
// registered op with a legal arity, its recorded output types equal what the op's inference
// derives from its inputs now (shapes consistent), and every fusion group is convex (no path
// leaves a group and re-enters it), so a group can run as one kernel.
#pragma once

#include "ir/graph.h"

namespace kiln::pass {

/// Throws kiln::Error(kInternal) naming the node and expected vs got.
void verify_typed_graph(const ir::Graph& g);

}  // namespace kiln::pass
