#include "pass/eliminate_common_subexpressions.h"

#include <cstring>
#include <map>
#include <sstream>

#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

/// Constants up to this many elements are compared byte by byte and merged.
constexpr int64_t kMaxMergedConstantElements = 4096;

bool merge_equal_constants(ir::Graph& g) {
    bool changed = false;
    std::map<std::string, std::vector<ir::Value*>> by_type;  // dtype+shape -> kept constants
    for (ir::Value* c : g.constants()) {
        const Tensor& t = c->constant();
        if (t.numel() > kMaxMergedConstantElements || is_graph_output(g, c)) continue;
        std::vector<ir::Value*>& kept = by_type[c->type().str()];
        ir::Value* same = nullptr;
        for (ir::Value* k : kept)
            if (std::memcmp(k->constant().data(), t.data(), t.nbytes()) == 0) same = k;
        if (!same) {
            kept.push_back(c);
            continue;
        }
        g.replace_all_uses(c, same);
        g.erase_constant(c);
        changed = true;
    }
    return changed;
}

std::string node_key(const ir::Node& n) {
    std::ostringstream os;
    os << n.op() << '(';
    for (const ir::Value* in : n.inputs()) os << static_cast<const void*>(in) << ',';
    os << "){";
    for (const auto& [k, a] : n.attrs()) os << k << '=' << ir::attr_str(a) << ';';
    os << '}';
    for (const ir::Value* o : n.outputs()) os << o->type().str() << ';';
    return os.str();
}

}  // namespace

bool eliminate_common_subexpressions(ir::Graph& g, const PassContext&) {
    bool changed = merge_equal_constants(g);
    std::map<std::string, ir::Node*> seen;
    for (ir::Node* n : g.nodes()) {
        if (is_random_op(n->op()) || n->op() == "Dropout") continue;  // Dropout may train
        if (is_recomputation(*n)) continue;  // a deliberate copy (autodiff/recompute.h)
        auto [it, inserted] = seen.emplace(node_key(*n), n);
        if (inserted) continue;
        ir::Node* first = it->second;
        bool all = true;
        for (size_t i = 0; i < n->num_outputs(); ++i) all &= replace_value(g, n->output(i), first->output(i));
        if (!all) continue;  // an output is a graph output that cannot be renamed: keep the node
        g.erase_node(n);
        changed = true;
    }
    return changed;
}

}  // namespace kiln::pass
