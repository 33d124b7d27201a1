// eliminate_common_subexpressions: two nodes with the same op, the same attributes and the
// same inputs compute the same values; the later one's outputs are replaced by the earlier
// one's and it is removed. Small constants with equal dtype, shape and bytes are merged first,
// so nodes reading equal copies of a constant (exporters repeat axes and scalars) match too.
// Random ops are never merged: two draws are different values.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool eliminate_common_subexpressions(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
