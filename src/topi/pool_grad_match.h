// Which nodes the runtime's MaxPool-gradient scatter computes (runtime/maxpool_grad_kernel.h):
// a unit of one KilnMaxPoolGrad node (op/defs/pool_grad.cc) with static shapes and a float32 or
// float64 dY, whatever the kernel source (the generated gather is the op's reference only).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_maxpool_grad kernel computing the unit, or nullopt.
std::optional<ExternChoice> match_pool_grad(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
