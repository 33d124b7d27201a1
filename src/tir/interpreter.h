// The tir interpreter: the reference semantics of a kernel (STYLE rule 8). Runs a PrimFunc on
// host tensors, ignoring loop kinds (everything serial). Used for constant folding of small
// tensors and as the oracle for generated kernels and schedules.
#pragma once

#include <vector>

#include "support/tensor.h"
#include "tir/stmt.h"

namespace kiln::tir {

/// `args` match `f.params` in order (dtype and element count are checked); outputs are written
/// in place.
void interpret(const PrimFunc& f, std::vector<Tensor>& args);

}  // namespace kiln::tir
