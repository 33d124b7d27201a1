// The estimated cost of a node, from the op registry's row: a roofline time
// max(flops / kNominalFlops, bytes / kNominalBytes), where flops is OpDef::flops (one per output
// element when the row has none) and bytes is what the node reads and writes (its inputs,
// constants included, and outputs). The nominal figures are one core's order of magnitude; only
// ratios matter, since the cost-balanced split compares stages of the same graph.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kiln::distributed {

inline constexpr double kNominalFlops = 50e9;  // FLOP/s, one core with FMA vectors
inline constexpr double kNominalBytes = 10e9;  // bytes/s, one core's share of memory bandwidth

/// Elements of a tensor type (unknown dims count as 1) and its bytes.
int64_t type_elements(const ir::TensorType& t);
int64_t type_bytes(const ir::TensorType& t);

struct NodeCost {
    double flops = 0;
    double bytes = 0;
    double seconds = 0;  // the roofline estimate
};

/// The node's estimate (kInvalidModel for an op the registry lacks).
NodeCost node_cost(const ir::Node& n);

}  // namespace kiln::distributed
