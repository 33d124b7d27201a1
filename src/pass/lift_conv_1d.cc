#include "pass/lift_conv_1d.h"

#include <set>
#include <string>
#include <vector>

#include "pass/eliminate_dead_code.h"
#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

bool static_f32(const ir::Value* v, int rank) {
    return v && v->type().dtype == DType::kFloat32 && v->type().rank() == rank && v->type().is_static();
}

ir::Value* reshape(ir::Graph& g, ir::Value* v, const Shape& to) {
    return add_inferred_node(g, "Reshape", {v, shape_constant(g, to)}, {}, 1, "lift")->output(0);
}

/// The rank-4 value [N, C, 1, W] that `v` ([N, C, W]) is a Reshape of, or nullptr. Dropping a
/// unit axis moves no element, so `v` and its source are the same memory.
ir::Value* lifted_source(const ir::Value* v) {
    const ir::Node* p = v ? v->producer() : nullptr;
    if (!p || p->op() != "Reshape" || !v->type().is_static() || v->type().rank() != 3) return nullptr;
    ir::Value* x = p->input(0);
    if (!x || !x->type().is_static() || x->type().rank() != 4 || x->type().dtype != v->type().dtype) return nullptr;
    const Shape s = x->type().static_shape(), t = v->type().static_shape();
    return s[2] == 1 && s[0] == t[0] && s[1] == t[1] && s[3] == t[2] ? x : nullptr;
}

/// [a, b, c] with a unit axis before the last: [a, b, 1, c].
Shape lifted_shape(const Shape& s) { return {s[0], s[1], 1, s[2]}; }

/// Replaces n's output 0 (rank 3) with a Reshape of `lifted` (its rank-4 form) and erases n.
bool finish(ir::Graph& g, ir::Node* n, ir::Node* lifted) {
    lifted->set_name(n->name());
    ir::Value* y = reshape(g, lifted->output(0), n->output(0)->type().static_shape());
    if (!replace_value(g, n->output(0), y)) return false;  // dead nodes stay for the cleanup
    g.topo_sort();
    g.erase_node(n);
    return true;
}

/// Conv over [N, C, W] -> Conv over [N, C, 1, W] (see the header).
bool lift_conv(ir::Graph& g, ir::Node* n) {
    if (n->op() != "Conv" || n->num_outputs() != 1 || n->num_inputs() < 2) return false;
    ir::Value* x = n->input(0);
    ir::Value* w = n->input(1);
    ir::Value* b = n->num_inputs() > 2 ? n->input(2) : nullptr;
    if (!static_f32(x, 3) || !static_f32(w, 3) || !static_f32(n->output(0), 3) || !is_constant_expr(w)) return false;
    const std::vector<int64_t> pads = n->attr_ints("pads", {0, 0}), strides = n->attr_ints("strides", {1}),
                               dilations = n->attr_ints("dilations", {1});
    if (pads.size() != 2 || strides.size() != 1 || dilations.size() != 1) return false;
    ir::AttrMap attrs;
    if (n->has_attr("auto_pad")) attrs["auto_pad"] = n->attrs().at("auto_pad");
    attrs["group"] = ir::Attr(n->attr_int("group", 1));
    const Shape ws = w->type().static_shape();
    attrs["kernel_shape"] = ir::Attr(std::vector<int64_t>{1, ws[2]});
    attrs["strides"] = ir::Attr(std::vector<int64_t>{1, strides[0]});
    attrs["dilations"] = ir::Attr(std::vector<int64_t>{1, dilations[0]});
    attrs["pads"] = ir::Attr(std::vector<int64_t>{0, pads[0], 0, pads[1]});
    std::vector<ir::Value*> ins = {reshape(g, x, lifted_shape(x->type().static_shape())), reshape(g, w, lifted_shape(ws))};
    if (b) ins.push_back(b);
    return finish(g, n, add_inferred_node(g, "Conv", ins, attrs, 1, "conv"));
}

bool is_unary(const std::string& op) {
    static const std::set<std::string> ops = {"Relu",     "Clip",      "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid",
                                              "HardSwish", "Erf",      "Elu",       "Selu",    "Celu", "Softplus",
                                              "Softsign",  "Gelu",     "Mish",      "Neg",     "Abs",  "Exp",
                                              "Log",       "Sqrt",     "Reciprocal", "ThresholdedRelu"};
    return ops.count(op) > 0;
}

bool is_binary(const std::string& op) {
    return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "PRelu";
}

/// An operand of a lifted binary op: its lifted source, or itself reshaped so that it
/// broadcasts against [N, C, 1, W] as it did against [N, C, W] (ranks 0 and 1 broadcast along
/// the last axis in both; rank 2 [C, W] becomes [C, 1, W], rank 3 [A, C, W] becomes [A, C, 1, W]).
ir::Value* lifted_operand(ir::Graph& g, ir::Value* in) {
    if (ir::Value* src = lifted_source(in)) return src;
    const Shape s = in->type().static_shape();
    if (s.size() <= 1) return in;
    if (s.size() == 2) return reshape(g, in, {s[0], 1, s[1]});
    return reshape(g, in, lifted_shape(s));
}

/// An elementwise op of a squeezed [N, C, 1, W] value runs on that value (see the header).
bool lift_elementwise(ir::Graph& g, ir::Node* n) {
    const bool unary = is_unary(n->op());
    if ((!unary && !is_binary(n->op())) || n->num_outputs() != 1 || !static_f32(n->output(0), 3)) return false;
    if (!unary && n->num_inputs() != 2) return false;
    const size_t tensor_inputs = unary ? 1 : 2;
    bool any_lifted = false;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        const ir::Value* in = n->input(i);
        if (i >= tensor_inputs) {  // Clip's bounds: scalars
            if (in && in->type().rank() > 1) return false;
            continue;
        }
        if (!in || !in->type().is_static() || in->type().rank() > 3) return false;
        any_lifted |= lifted_source(in) != nullptr;
    }
    if (!any_lifted) return false;
    std::vector<ir::Value*> ins;
    for (size_t i = 0; i < n->num_inputs(); ++i)
        ins.push_back(i < tensor_inputs ? lifted_operand(g, n->input(i)) : n->input(i));
    return finish(g, n, add_inferred_node(g, n->op(), ins, n->attrs(), 1, n->op()));
}

/// Reshape(v, [N, C, 1, W]) of a squeezed [N, C, 1, W] value `v`: that value.
bool cancel(ir::Graph& g, ir::Node* n) {
    if (n->op() != "Reshape" || n->num_outputs() != 1) return false;
    ir::Value* src = lifted_source(n->input(0));
    if (!src || !(src->type() == n->output(0)->type()) || !replace_value(g, n->output(0), src)) return false;
    g.erase_node(n);
    return true;
}

}  // namespace

bool lift_conv_1d(ir::Graph& g, const PassContext& ctx) {
    bool changed = false;
    for (ir::Node* n : g.nodes()) changed |= lift_conv(g, n);
    if (!changed) return false;
    for (bool again = true; again;) {
        again = false;
        for (ir::Node* n : g.nodes())
            if (lift_elementwise(g, n) || cancel(g, n)) {
                again = true;
                break;
            }
    }
    eliminate_dead_code(g, ctx);
    g.topo_sort();
    return true;
}

}  // namespace kiln::pass
