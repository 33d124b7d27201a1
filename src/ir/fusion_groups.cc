#include "ir/fusion_groups.h"

#include <map>

namespace kiln::ir {

FusionGroups fusion_groups(const Graph& g) {
    FusionGroups out;
    std::map<int, int> set_of_group;
    for (Node* n : g.nodes()) {
        int s;
        if (n->group() >= 0 && set_of_group.count(n->group())) {
            s = set_of_group[n->group()];
        } else {
            s = static_cast<int>(out.sets.size());
            out.sets.emplace_back();
            if (n->group() >= 0) set_of_group[n->group()] = s;
        }
        out.sets[s].push_back(n);
        out.set_of.push_back(s);
    }
    return out;
}

}  // namespace kiln::ir
