#include "pass/eliminate_dead_code.h"

#include <unordered_set>

namespace kiln::pass {

bool eliminate_dead_code(ir::Graph& g, const PassContext&) {
    std::unordered_set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
    bool changed = false;
    std::vector<ir::Node*> nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        ir::Node* n = *it;
        bool used = false;
        for (const ir::Value* o : n->outputs()) used |= !o->users().empty() || outputs.count(o);
        if (used) continue;
        g.erase_node(n);
        changed = true;
    }
    for (ir::Value* c : g.constants()) {
        if (!c->users().empty() || outputs.count(c)) continue;
        g.erase_constant(c);
        changed = true;
    }
    return changed;
}

}  // namespace kiln::pass
