// GraphPlan (see graph_plan.h).
#include "compiler/graph_plan.h"

#include <algorithm>

#include "op/registry.h"

namespace kiln::compiler {

bool has_graph_attr(const ir::Node& n) {
    for (const auto& [k, a] : n.attrs())
        if (std::holds_alternative<ir::GraphAttr>(a)) return true;
    return false;
}

// Names a node's sub-graphs (and theirs, recursively) read from enclosing scopes.
void captured_names(const ir::Node& n, std::set<std::string>& out) {
    for (const auto& [k, a] : n.attrs()) {
        const auto* g = std::get_if<ir::GraphAttr>(&a);
        if (!g || !*g) continue;
        for (const ir::Value* v : (*g)->outer_inputs()) out.insert(v->name());
        for (const ir::Node* inner : (*g)->nodes()) captured_names(*inner, out);
    }
}

namespace {

// `outer_fixed`: slots of outer-scope values that are fixed in their own graph.
void mark_fixed(GraphPlan& p, const std::vector<int>& outer_fixed) {
    std::vector<char>& fixed_slot = p.fixed_slot;
    fixed_slot.assign(static_cast<size_t>(p.num_slots), 0);
    std::fill(fixed_slot.begin(), fixed_slot.begin() + static_cast<std::ptrdiff_t>(p.constants.size()), 1);
    for (int slot : outer_fixed) fixed_slot[static_cast<size_t>(slot)] = 1;
    p.fixed.resize(p.nodes.size());
    p.memoize.assign(p.nodes.size(), 0);
    p.memo.resize(p.nodes.size());
    for (size_t i = 0; i < p.nodes.size(); ++i) {
        bool all = !p.inputs[i].empty();
        for (int slot : p.inputs[i]) {
            p.fixed[i].push_back(slot >= 0 && fixed_slot[static_cast<size_t>(slot)]);
            all &= slot < 0 || fixed_slot[static_cast<size_t>(slot)];
        }
        const op::OpDef* def = p.defs[i];
        if (!all || !def || !def->compute || has_graph_attr(*p.nodes[i])) continue;
        p.memoize[i] = 1;
        for (int slot : p.outputs[i]) fixed_slot[static_cast<size_t>(slot)] = 1;
    }
}

}  // namespace

std::unique_ptr<GraphPlan> make_graph_plan(const ir::Graph& g,
                                           const std::function<bool(const std::string&)>& outer_is_fixed) {
    auto plan = std::make_unique<GraphPlan>();
    GraphPlan& p = *plan;
    for (const ir::Value* c : g.constants()) {
        p.slot_of(c);
        p.constants.emplace_back(c->constant());
    }
    for (const ir::Value* v : g.inputs()) p.graph_inputs.push_back(p.slot_of(v));
    for (const ir::Value* v : g.outer_inputs()) p.outer.emplace_back(p.slot_of(v), v);
    const op::OpRegistry& reg = op::OpRegistry::global();
    std::vector<int> last_use;  // by slot: index of the last node reading it
    auto use = [&](int slot, int i) {
        if (static_cast<size_t>(slot) >= last_use.size()) last_use.resize(static_cast<size_t>(slot) + 1, -1);
        last_use[static_cast<size_t>(slot)] = i;
    };
    for (const ir::Node* n : g.nodes()) {
        const int i = static_cast<int>(p.nodes.size());
        p.nodes.push_back(n);
        p.defs.push_back(reg.find(n->op()));
        std::vector<int> ins, outs;
        for (const ir::Value* v : n->inputs()) {
            ins.push_back(v ? p.slot_of(v) : -1);
            if (v) use(ins.back(), i);
        }
        std::set<std::string> captured;  // a sub-graph reading a value by name uses it here too
        captured_names(*n, captured);
        for (const std::string& name : captured)
            if (const ir::Value* v = g.find_value(name)) use(p.slot_of(v), i);
        for (const ir::Value* v : n->outputs()) outs.push_back(p.slot_of(v));
        p.inputs.push_back(std::move(ins));
        p.outputs.push_back(std::move(outs));
    }
    for (const ir::Value* v : g.outputs()) p.graph_outputs.push_back(p.slot_of(v));
    std::vector<int> outer_fixed;
    for (const auto& [slot, v] : p.outer)
        if (outer_is_fixed(v->name())) outer_fixed.push_back(slot);
    mark_fixed(p, outer_fixed);
    // Values are dropped after their last use, unless they are constants or graph outputs.
    p.release.resize(p.nodes.size());
    std::set<int> kept(p.graph_outputs.begin(), p.graph_outputs.end());
    for (size_t slot = p.constants.size(); slot < last_use.size(); ++slot)
        if (last_use[slot] >= 0 && !kept.count(static_cast<int>(slot)))
            p.release[static_cast<size_t>(last_use[slot])].push_back(static_cast<int>(slot));
    return plan;
}


}  // namespace kiln::compiler
