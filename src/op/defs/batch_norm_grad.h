// The float32 training-mode BatchNormalization gradient as one KilnBatchNormGrad node
// (batch_norm_grad.cc), for BatchNormalization's gradient entry (nn.cc).
#pragma once

#include <optional>
#include <vector>

#include "op/gradient.h"

namespace kiln::op {

/// The node's gradients (dX, dscale, dB; none for the statistics) through one
/// KilnBatchNormGrad, with a ReLU's mask on the output folded in; nullopt where it does not
/// apply (inference mode, a dtype other than float32 for X, scale or B, dynamic shapes), and
/// the decomposition is used.
std::optional<std::vector<ir::Value*>> batch_norm_grad_kernel(GradientBuilder& b);

}  // namespace kiln::op
