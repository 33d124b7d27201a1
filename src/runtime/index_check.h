// The executors' check of a step's index inputs before it runs (Executable::index_checks): an
// index outside the axis it addresses is an error naming the node, the element and the range
// (ONNX leaves such indices undefined; the generated kernels clamp them, ONNX Runtime refuses
// them). compiler/index_checks.h says which inputs get a check.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::runtime {

/// Runs the checks of step `step` over its argument pointers `args`; `dims` are the run's
/// symbolic dim values (empty for a static executable). Ok when the step has none.
Status check_step_indices(const Executable& exe, size_t step, void* const* args, const std::vector<int64_t>& dims);

}  // namespace kiln::runtime
