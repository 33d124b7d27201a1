// infer_shapes: re-derives every node's output types through its OpDef (importer types and
// types left by rewrites are provisional) and evaluates the shape arithmetic that makes
// shape operands static: Shape and Size nodes (their value is the static type of their input),
// and every node with all-constant inputs whose result flows into a value input (Reshape's
// target, Slice's starts, ...), e.g. the Shape -> Gather -> Concat -> Reshape chains exporters
// write. Runs at every level: later passes and lowering need static types and constant shape
// operands. Throws kiln::Error naming the node when inference fails, an output stays
// non-static, or a value input is not a constant once its producers are evaluated.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool infer_shapes(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
