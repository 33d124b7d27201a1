#include "distributed/stage_cost.h"

#include <algorithm>

namespace kiln::distributed {

NodeCost node_cost(const ir::Node& n) {
    const op::NodeWork w = op::node_work(n);
    NodeCost c;
    c.flops = w.flops;
    c.bytes = w.bytes;
    c.seconds = std::max(c.flops / kNominalFlops, c.bytes / kNominalBytes);
    return c;
}

}  // namespace kiln::distributed
