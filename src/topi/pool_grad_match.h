// Which nodes the runtime's MaxPool training kernels compute, whatever the kernel source (the
// generated forms are the ops' references only):
//  - the gradient scatter (runtime/maxpool_grad_kernel.h): a unit of one KilnMaxPoolGrad node
//    (op/defs/pool_grad.cc) with static shapes and a float32 or float64 dY;
//  - the forward with Indices (runtime/maxpool_kernel.h): a unit of one MaxPool node whose
//    Indices are an output of the unit, row-major (storage_order 0), with static shapes and a
//    float32 (output rows of at least 16) or float64 X of 1 to 3 spatial dims. A MaxPool without Indices stays generated
//    (the separable pool of op/defs/pool.cc).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_maxpool_grad kernel computing the unit, or nullopt.
std::optional<ExternChoice> match_pool_grad(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs);

/// The kiln_maxpool kernel computing the unit (MaxPool with Indices), or nullopt.
std::optional<ExternChoice> match_max_pool_indices(const std::vector<ir::Node*>& nodes,
                                                   const std::vector<ir::Value*>& inputs,
                                                   const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
