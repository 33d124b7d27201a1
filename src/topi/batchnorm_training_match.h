// Which nodes the runtime's training-mode BatchNormalization kernels compute
// (runtime/batchnorm_training_kernel.h), whatever the kernel source: a unit of one float32
// BatchNormalization with training_mode=1 and its three outputs, or of it and the ReLU that
// alone reads its Y (pass/fuse_operators.cc; the unit's first output is then max(Y, 0))
// (kiln_bn_train), or of one
// KilnBatchNormGrad (op/defs/batch_norm_grad.cc) with its three outputs (kiln_bn_grad); static
// shapes. The ops' TE computes stay the reference and the float64 path.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_bn_train or kiln_bn_grad kernel computing the unit, or nullopt.
std::optional<ExternChoice> match_batchnorm_training(const std::vector<ir::Node*>& nodes,
                                                     const std::vector<ir::Value*>& inputs,
                                                     const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
