// The estimated cost of a node for the pipeline split: a roofline time
// max(flops / kNominalFlops, bytes / kNominalBytes) of the node's work (op/node_cost.h). The
// nominal figures are one core's order of magnitude; only ratios matter, since the cost-balanced
// split compares stages of the same graph.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "op/node_cost.h"

namespace kiln::distributed {

inline constexpr double kNominalFlops = 50e9;  // FLOP/s, one core with FMA vectors
inline constexpr double kNominalBytes = 10e9;  // bytes/s, one core's share of memory bandwidth

using op::type_bytes;
using op::type_elements;

struct NodeCost {
    double flops = 0;
    double bytes = 0;
    double seconds = 0;  // the roofline estimate
};

/// The node's estimate (kInvalidModel for an op the registry lacks).
NodeCost node_cost(const ir::Node& n);

}  // namespace kiln::distributed
