// eliminate_dead_code: removes nodes none of whose outputs is used (by a node or as a graph
// output), walking backwards so whole dead chains go in one pass; drops unused trailing
// optional outputs (MaxPool's Indices, Dropout's mask, ...: down to the op's min_outputs), so
// kernels stop computing them; then removes constants nobody reads. Graph inputs stay: they are
// the model's interface.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool eliminate_dead_code(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
