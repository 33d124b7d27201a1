// Structural checks of a Graph: unique value names, SSA (each value defined once), every input
// defined before use (topological order), user lists consistent, outputs defined.
// Throws kiln::Error(kInvalidModel) naming the node; the message says expected vs got.
#pragma once

#include "ir/graph.h"

namespace kiln::ir {

void verify_graph(const Graph& g);

}  // namespace kiln::ir
