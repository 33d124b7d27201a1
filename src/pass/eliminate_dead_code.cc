#include "pass/eliminate_dead_code.h"

#include <algorithm>
#include <unordered_set>

#include "op/registry.h"

namespace kiln::pass {
namespace {

/// Rebuilds `n` without its unused trailing outputs (kept >= the op's min_outputs). Returns
/// whether it did.
bool drop_unused_trailing_outputs(ir::Graph& g, ir::Node* n, const std::unordered_set<const ir::Value*>& outputs) {
    const op::OpDef* def = op::OpRegistry::global().find(n->op());
    // Split's output count is part of its meaning (the number of equal parts, or one part
    // per entry of its sizes input): dropping an unused last part would change the others.
    if (!def || n->op() == "Split") return false;
    size_t keep = n->num_outputs();
    while (keep > static_cast<size_t>(std::max(def->min_outputs, 1))) {
        const ir::Value* o = n->output(keep - 1);
        if (!o->users().empty() || outputs.count(o)) break;
        --keep;
    }
    if (keep == n->num_outputs()) return false;
    std::vector<ir::TensorType> types;
    std::vector<std::string> names;
    for (size_t i = 0; i < keep; ++i) {
        ir::Value* o = n->output(i);
        types.push_back(o->type());
        names.push_back(o->name());
        o->set_name(g.fresh_name(o->name() + ".dropped"));
    }
    ir::Node* m = g.add_node(n->op(), n->inputs(), n->attrs(), types, names, n->name());
    m->set_role(n->role());
    for (size_t i = 0; i < keep; ++i) g.replace_all_uses(n->output(i), m->output(i));
    g.erase_node(n);
    return true;
}

}  // namespace

bool eliminate_dead_code(ir::Graph& g, const PassContext&) {
    std::unordered_set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
    bool changed = false;
    std::vector<ir::Node*> nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        ir::Node* n = *it;
        const op::OpDef* def = op::OpRegistry::global().find(n->op());
        bool used = def && def->has_side_effect;
        for (const ir::Value* o : n->outputs()) used |= !o->users().empty() || outputs.count(o);
        if (used) continue;
        g.erase_node(n);
        changed = true;
    }
    bool rebuilt = false;
    for (ir::Node* n : g.nodes()) rebuilt |= drop_unused_trailing_outputs(g, n, outputs);
    if (rebuilt) g.topo_sort();
    changed |= rebuilt;
    for (ir::Value* c : g.constants()) {
        if (!c->users().empty() || outputs.count(c)) continue;
        g.erase_constant(c);
        changed = true;
    }
    return changed;
}

}  // namespace kiln::pass
