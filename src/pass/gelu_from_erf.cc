// gelu_from_erf (see gelu_from_erf.h).
#include "pass/gelu_from_erf.h"

#include <cmath>

#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

/// Whether `v` is a constant whose every element is `want` (to float32's precision). Its shape
/// may broadcast: match() checks that each op's output has x's type.
bool near(const ir::Value* v, double want) {
    const std::optional<double> c = v && v->is_constant() ? uniform_constant(v) : std::nullopt;
    return c && std::fabs(*c - want) <= 1e-6 * std::fabs(want);
}

/// The operand of binary `n` other than `v` (nullptr unless exactly one operand is `v`).
ir::Value* other(const ir::Node* n, const ir::Value* v) {
    if (n->num_inputs() != 2 || n->num_outputs() != 1) return nullptr;
    if (n->input(0) == v && n->input(1) != v) return n->input(1);
    if (n->input(1) == v && n->input(0) != v) return n->input(0);
    return nullptr;
}

/// The GELU whose Erf is `erf`: its input x and its five nodes, first to last (empty if none).
struct Match {
    ir::Value* x = nullptr;
    std::vector<ir::Node*> nodes;
};

Match match(const ir::Graph& g, ir::Node* erf) {
    ir::Node* scale = erf->input(0)->producer();
    if (!scale || scale->num_inputs() != 2 || sole_user(g, scale->output(0)) != erf) return {};
    ir::Value* x = nullptr;
    if (scale->op() == "Div" && near(scale->input(1), std::sqrt(2.0))) x = scale->input(0);
    else if (scale->op() == "Mul" && near(scale->input(1), std::sqrt(0.5))) x = scale->input(0);
    else if (scale->op() == "Mul" && near(scale->input(0), std::sqrt(0.5))) x = scale->input(1);
    if (!x || x->type() != erf->output(0)->type()) return {};
    ir::Node* plus = sole_user(g, erf->output(0));
    if (!plus || plus->op() != "Add" || !near(other(plus, erf->output(0)), 1.0)) return {};
    ir::Node* times = sole_user(g, plus->output(0));
    if (!times || times->op() != "Mul" || other(times, plus->output(0)) != x) return {};
    ir::Node* half = sole_user(g, times->output(0));
    if (!half || half->op() != "Mul" || !near(other(half, times->output(0)), 0.5)) return {};
    for (const ir::Node* n : {plus, times, half})
        if (n->output(0)->type() != x->type()) return {};
    return {x, {scale, erf, plus, times, half}};
}

}  // namespace

bool gelu_from_erf(ir::Graph& g) {
    std::vector<ir::Node*> erfs;  // a rewrite erases nodes of its own chain only, one Erf each
    for (ir::Node* n : g.nodes())
        if (n->op() == "Erf" && n->num_inputs() == 1 && n->num_outputs() == 1) erfs.push_back(n);
    bool changed = false;
    for (ir::Node* erf : erfs) {
        const Match m = match(g, erf);
        if (!m.x) continue;
        ir::Node* last = m.nodes.back();
        ir::Node* gelu = add_inferred_node(g, "Gelu", {m.x}, {{"approximate", ir::Attr(std::string("none"))}}, 1,
                                           last->name().empty() ? "gelu" : last->name());
        replace_keeping_output_name(g, last->output(0), gelu->output(0));
        for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) g.erase_node(*it);
        changed = true;
    }
    if (changed) g.topo_sort();
    return changed;
}

}  // namespace kiln::pass
