// Which TopK, CumSum and ScatterND nodes the runtime's order-dependent kernels compute
// (runtime/index_kernels.h): a unit of one such node with static shapes, an element type the
// kernels take (float32/64, int32/64) and its constant inputs (TopK's K, CumSum's axis) known.
// The match holds for every kernel source: the generated forms are O(n^2) per line.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_topk / kiln_cumsum / kiln_scatternd kernel computing the unit, or nullopt. `inputs`
/// and `outputs` are the unit's arguments in order (the kernel's args are inputs then outputs).
std::optional<ExternChoice> match_index_kernel(const std::vector<ir::Node*>& nodes,
                                               const std::vector<ir::Value*>& inputs,
                                               const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
