// Structural verifier (see verifier.h). One pass over inputs, constants and nodes in order,
// tracking which values are defined so far; then the user lists are recomputed from the node
// inputs and compared with each value's users() as multisets.
#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "support/error.h"

namespace kiln::ir {
namespace {
std::string vname(const Value* v) { return "'" + v->name() + "'"; }
}  // namespace

void verify_graph(const Graph& g) {
    std::unordered_set<std::string> names;
    std::unordered_set<const Value*> defined;
    std::vector<Node*> nodes = g.nodes();
    std::unordered_map<const Node*, size_t> node_pos;
    for (size_t i = 0; i < nodes.size(); ++i) node_pos[nodes[i]] = i;

    auto define = [&](const Value* v, const std::string& where) {
        KILN_CHECK(defined.insert(v).second, kInvalidModel)
            << where << ": value " << vname(v) << " is defined more than once (expected SSA)";
        KILN_CHECK(names.insert(v->name()).second, kInvalidModel)
            << where << ": value name " << vname(v)
            << " is used by two different values (expected unique names)";
    };
    for (const Value* v : g.inputs()) {
        KILN_CHECK(v != nullptr, kInvalidModel) << "graph '" << g.name << "': null graph input";
        KILN_CHECK(v->is_graph_input() && !v->producer() && !v->is_constant(), kInvalidModel)
            << "graph input " << vname(v) << ": expected a plain input (no producer, no data), got "
            << (v->producer()         ? "a node output"
                : v->is_graph_input() ? "a constant"
                                      : "a value not marked as input");
        define(v, "graph input " + vname(v));
    }
    for (const Value* v : g.outer_inputs()) define(v, "outer-scope value " + vname(v));
    for (const Value* v : g.constants()) {
        KILN_CHECK(v->is_constant() && !v->producer() && !v->is_graph_input(), kInvalidModel)
            << "constant " << vname(v) << ": expected data and no producer";
        Shape s = v->constant().shape();
        KILN_CHECK(v->type() == TensorType::of_static(v->constant().dtype(), s), kInvalidModel)
            << "constant " << vname(v) << ": declared type " << v->type().str()
            << ", data has type " << TensorType::of_static(v->constant().dtype(), s).str();
        define(v, "constant " + vname(v));
    }
    std::unordered_map<const Value*, std::unordered_map<const Node*, int>> uses;
    for (size_t pos = 0; pos < nodes.size(); ++pos) {
        const Node* n = nodes[pos];
        for (size_t i = 0; i < n->num_inputs(); ++i) {
            const Value* in = n->input(i);
            if (!in) continue;  // omitted optional input
            ++uses[in][n];
            if (defined.count(in)) continue;
            const Node* p = in->producer();
            bool later = p && node_pos.count(p) && node_pos[p] > pos;
            KILN_THROW(kInvalidModel)
                << n->describe() << ": input " << i << " " << vname(in)
                << (later ? " is produced by a later " + p->describe() +
                                " (expected topological order)"
                          : " is not defined in this graph (expected an input, "
                            "constant or earlier node output)");
        }
        for (size_t i = 0; i < n->num_outputs(); ++i) {
            const Value* o = n->output(i);
            KILN_CHECK(o != nullptr, kInvalidModel)
                << n->describe() << ": output " << i << " is null";
            KILN_CHECK(o->producer() == n && o->producer_index() == static_cast<int>(i),
                       kInvalidModel)
                << n->describe() << ": output " << i << " " << vname(o) << " names producer "
                << (o->producer() ? o->producer()->describe() : std::string("none")) << " index "
                << o->producer_index() << " (expected this node, index " << i << ")";
            KILN_CHECK(!o->is_graph_input(), kInvalidModel)
                << n->describe() << ": output " << vname(o) << " is also a graph input";
            define(o, n->describe());
        }
    }
    for (const Value* v : defined) {
        std::unordered_map<const Node*, int> listed;
        for (const Node* u : v->users()) ++listed[u];
        auto it = uses.find(v);
        static const std::unordered_map<const Node*, int> kNone;
        const auto& actual = it == uses.end() ? kNone : it->second;
        for (const auto& [u, count] : listed) {
            auto a = actual.find(u);
            int real = a == actual.end() ? 0 : a->second;
            KILN_CHECK(real == count, kInvalidModel)
                << "value " << vname(v) << ": user list names " << u->describe() << " " << count
                << " time(s), but that node reads it in " << real << " input slot(s)";
        }
        for (const auto& [u, count] : actual)
            KILN_CHECK(listed.count(u), kInvalidModel)
                << "value " << vname(v) << ": " << u->describe() << " reads it in " << count
                << " input slot(s) but is missing from its user list";
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
        const Value* o = g.outputs()[i];
        KILN_CHECK(o != nullptr, kInvalidModel)
            << "graph '" << g.name << "': output " << i << " is null";
        KILN_CHECK(defined.count(o), kInvalidModel)
            << "graph '" << g.name << "': output " << i << " " << vname(o)
            << " is not defined in the graph";
    }
}

}  // namespace kiln::ir
