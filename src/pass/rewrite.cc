#include "pass/rewrite.h"

#include <algorithm>

#include "op/registry.h"
#include "support/error.h"

namespace kiln::pass {

bool is_graph_output(const ir::Graph& g, const ir::Value* v) {
    return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

bool replace_value(ir::Graph& g, ir::Value* from, ir::Value* to) {
    KILN_ICHECK(from != to && from->type() == to->type())
        << "replace_value: '" << from->name() << "' " << from->type().str() << " by '" << to->name() << "' "
        << to->type().str();
    if (is_graph_output(g, from) && (!to->producer() || is_graph_output(g, to))) return false;
    replace_keeping_output_name(g, from, to);
    return true;
}

void replace_keeping_output_name(ir::Graph& g, ir::Value* from, ir::Value* to) {
    if (is_graph_output(g, from)) {
        KILN_ICHECK(to->producer() && !is_graph_output(g, to))
            << "replace_keeping_output_name: '" << to->name() << "' cannot take over output '" << from->name() << "'";
        std::string name = from->name();
        from->set_name(g.fresh_name(name + ".replaced"));
        to->set_name(name);
    }
    g.replace_all_uses(from, to);
}

std::optional<double> uniform_constant(const ir::Value* v) {
    if (!v || !v->is_constant()) return std::nullopt;
    const Tensor& t = v->constant();
    if (t.numel() == 0) return std::nullopt;
    double first = t.get_f64(0);
    for (int64_t i = 1; i < t.numel(); ++i)
        if (t.get_f64(i) != first) return std::nullopt;
    return first;
}

bool is_recomputation(const ir::Node& n) { return n.role() == ir::NodeRole::kRecompute; }

bool is_random_op(const std::string& op) {
    return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial";
}

ir::Value* shape_constant(ir::Graph& g, const Shape& s) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(s.size())});
    for (size_t i = 0; i < s.size(); ++i) t.set_i64(static_cast<int64_t>(i), s[i]);
    return add_constant_like(g, "shape", std::move(t));
}

bool is_constant_expr(const ir::Value* v, int depth) {
    if (v->is_constant()) return true;
    const ir::Node* p = v->producer();
    if (!p || p->num_inputs() == 0 || depth > 16) return false;
    for (const ir::Value* in : p->inputs())
        if (in && !is_constant_expr(in, depth + 1)) return false;
    return true;
}

ir::Value* add_constant_like(ir::Graph& g, const std::string& hint, Tensor data) {
    return g.add_constant(g.fresh_name(hint), std::move(data));
}

ir::Node* add_inferred_node(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& inputs,
                            ir::AttrMap attrs, int num_outputs, const std::string& name_hint) {
    std::vector<ir::TensorType> placeholder_types(static_cast<size_t>(num_outputs));
    std::vector<std::string> names;
    for (int i = 0; i < num_outputs; ++i) names.push_back(g.fresh_name(name_hint.empty() ? op : name_hint));
    ir::Node* n = g.add_node(op, inputs, std::move(attrs), placeholder_types, names, "");
    op::infer_node(*n);
    return n;
}

ir::Node* sole_user(const ir::Graph& g, const ir::Value* v) {
    if (v->users().size() != 1 || is_graph_output(g, v)) return nullptr;
    return v->users()[0];
}

}  // namespace kiln::pass
