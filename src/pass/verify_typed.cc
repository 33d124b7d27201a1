#include "pass/verify_typed.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/verifier.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

void verify_node_types(const ir::Node& n) {
    const op::OpDef* def = op::OpRegistry::global().find(n.op());
    KILN_CHECK(def != nullptr, kInternal) << n.describe() << ": op '" << n.op() << "' is not registered";
    const int ins = static_cast<int>(n.num_inputs()), outs = static_cast<int>(n.num_outputs());
    // max_inputs < 0: variadic (Concat, Sum, ...).
    KILN_CHECK(ins >= def->min_inputs && (def->max_inputs < 0 || ins <= def->max_inputs), kInternal)
        << n.describe() << ": expected " << def->min_inputs << ".." << def->max_inputs << " inputs, got " << ins;
    KILN_CHECK(outs >= def->min_outputs && (def->max_outputs < 0 || outs <= def->max_outputs), kInternal)
        << n.describe() << ": expected " << def->min_outputs << ".." << def->max_outputs << " outputs, got " << outs;
    if (!def->infer) return;
    std::vector<ir::TensorType> want;
    try {
        want = def->infer(n);
    } catch (Error& e) {
        e.add_context("while re-inferring the types of " + n.describe() + " (typed verifier)");
        throw;
    }
    // An op may infer its optional trailing outputs too (MaxPool's indices): compare the present ones.
    KILN_CHECK(want.size() >= n.num_outputs(), kInternal)
        << n.describe() << ": inference gives " << want.size() << " output types for " << outs << " outputs";
    for (size_t i = 0; i < n.num_outputs(); ++i)
        KILN_CHECK(want[i] == n.output(i)->type(), kInternal)
            << n.describe() << ": output " << i << " ('" << n.output(i)->name() << "') is recorded as "
            << n.output(i)->type().str() << " but its inputs give " << want[i].str();
}

/// No path group -> outside node -> group: walk forward from the group's outside users and
/// fail if the walk reaches the group again.
void verify_groups_convex(const ir::Graph& g) {
    std::map<int, std::vector<const ir::Node*>> groups;
    for (const ir::Node* n : g.nodes())
        if (n->group() >= 0) groups[n->group()].push_back(n);
    for (const auto& [id, members] : groups) {
        std::unordered_set<const ir::Node*> seen;
        std::vector<const ir::Node*> stack;
        for (const ir::Node* m : members)
            for (const ir::Value* o : m->outputs())
                for (const ir::Node* u : o->users())
                    if (u->group() != id && seen.insert(u).second) stack.push_back(u);
        while (!stack.empty()) {
            const ir::Node* x = stack.back();
            stack.pop_back();
            for (const ir::Value* o : x->outputs())
                for (const ir::Node* u : o->users()) {
                    KILN_CHECK(u->group() != id, kInternal)
                        << "fusion group " << id << " is not convex: " << u->describe() << " reads "
                        << x->describe() << ", which depends on the group from outside it";
                    if (seen.insert(u).second) stack.push_back(u);
                }
        }
    }
}

}  // namespace

void verify_typed_graph(const ir::Graph& g) {
    ir::verify_graph(g);
    for (const ir::Node* n : g.nodes()) verify_node_types(*n);
    verify_groups_convex(g);
}

}  // namespace kiln::pass
