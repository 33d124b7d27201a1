// Which index inputs the executors check before a step runs (runtime::IndexCheck,
// runtime/index_check.h): ONNX leaves an out-of-range index undefined, the generated kernels
// clamp it into the axis, and ONNX Runtime refuses it, so Kiln checks every run-time index input
// of Gather, GatherElements, ScatterElements, GatherND (indices; negatives count from the end),
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (the target; ignore_index allowed).
// Only inputs of a step's unit are checked: indices computed inside a fused unit are not (the
// importer's models feed them from graph inputs or other units).
#pragma once

#include <vector>

#include "compiler/lower_group.h"
#include "runtime/executable.h"

namespace kiln::compiler {

/// The checks of `exe`'s steps; `units[s]` is step s's unit (steps past the end have none).
std::vector<runtime::IndexCheck> index_checks(const runtime::Executable& exe, const std::vector<const KernelUnit*>& units);

}  // namespace kiln::compiler
