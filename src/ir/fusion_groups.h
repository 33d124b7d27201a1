// The graph's nodes by fusion group (ir::Node::group, set by pass/fuse_operators.h): the sets
// that become one kernel each. The compiler's kernel units (compiler/lower_group.h) and the
// device placement's clusters (pass/place_devices.h) both start from them.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct FusionGroups {
    /// Nodes with the same group id >= 0 form one set, every other node its own; sets in the
    /// order of their first node, nodes in graph order.
    std::vector<std::vector<Node*>> sets;
    /// Per node, the index of its set (parallel to Graph::nodes()).
    std::vector<int> set_of;
};

FusionGroups fusion_groups(const Graph& g);

}  // namespace kiln::ir
