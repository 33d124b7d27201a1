#include "pass/fold_batch_norm.h"

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

ir::Value* node1(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& ins) {
    return add_inferred_node(g, op, ins, {}, 1, "bnfold")->output(0);
}

/// A Conv or Gemm whose output is read only by `user`, with constant weights and bias. Its
/// weights W (Conv [M, C, k...]; Gemm B, [K, N] or [N, K] with transB) and bias b (Conv B [M];
/// Gemm beta * C) are folded into.
struct Linear {
    ir::Node* node = nullptr;
    bool gemm = false;
    int64_t channels = 0;  // M (Conv) or N (Gemm): the output's channel axis (1)
};

Linear foldable_linear(const ir::Graph& g, const ir::Value* v, const ir::Node* user) {
    ir::Node* n = v->producer();
    if (!n || (n->op() != "Conv" && n->op() != "Gemm") || sole_user(g, v) != user) return {};
    if (!is_constant_expr(n->input(1))) return {};
    if (n->input(2) && !is_constant_expr(n->input(2))) return {};
    if (n->op() == "Gemm" && n->output(0)->type().rank() != 2) return {};
    const ir::Dim& channels = n->output(0)->type().shape.at(1);  // static also in symbolic compiles
    if (!channels.is_static()) return {};
    return {n, n->op() == "Gemm", channels.value};
}

/// The weights scaled along the output-channel axis by c (cm = 1 or the channel count).
ir::Value* scaled_weights(ir::Graph& g, const Linear& l, ir::Value* c, int64_t cm) {
    ir::Value* w = l.node->input(1);
    Shape s(static_cast<size_t>(w->type().rank()), 1);
    if (!l.gemm || l.node->attr_int("transB", 0))
        s[0] = cm;  // Conv [M, ...]; Gemm B^T [N, K]
    else
        s[1] = cm;  // Gemm B [K, N]
    return node1(g, "Mul", {w, node1(g, "Reshape", {c, shape_constant(g, s)})});
}

/// The bias as it enters the output (Gemm: beta * C), or zeros of [channels] when absent.
ir::Value* bias_or_zero(ir::Graph& g, const Linear& l) {
    ir::Value* b = l.node->input(2);
    const DType dt = l.node->output(0)->type().dtype;
    if (!b) return add_constant_like(g, "zero_bias", Tensor(dt, {l.channels}));
    double beta = l.gemm ? l.node->attr_float("beta", 1.0) : 1.0;
    if (beta == 1.0) return b;
    Tensor t(dt, {});
    t.set_f64(0, beta);
    return node1(g, "Mul", {b, add_constant_like(g, "beta", t)});
}

/// Replaces the value after the folded op with the linear op over (w, b) and drops the old pair.
void rebuild(ir::Graph& g, const Linear& l, ir::Node* after, ir::Value* w, ir::Value* b) {
    std::vector<ir::Value*> ins = {l.node->input(0), w};
    if (b) ins.push_back(b);
    ir::AttrMap attrs = l.node->attrs();
    if (l.gemm) attrs["beta"] = ir::Attr(1.0);  // beta is inside the new bias
    ir::Node* fused = add_inferred_node(g, l.node->op(), ins, attrs, 1, "folded");
    fused->set_name(l.node->name());
    KILN_ICHECK(replace_value(g, after->output(0), fused->output(0))) << "fold_batch_norm: output rename";
    g.topo_sort();
    g.erase_node(after);
    g.erase_node(l.node);
}

bool fold_bn(ir::Graph& g, ir::Node* bn) {
    if (bn->num_outputs() != 1 || bn->attr_int("training_mode", 0) != 0) return false;
    Linear l = foldable_linear(g, bn->input(0), bn);
    if (!l.node) return false;
    const DType dt = l.node->output(0)->type().dtype;
    for (size_t i = 1; i < 5; ++i)
        if (!is_constant_expr(bn->input(i)) || bn->input(i)->type().dtype != dt) return false;
    Tensor eps(dt, {});
    eps.set_f64(0, bn->attr_float("epsilon", 1e-5));
    ir::Value* s = node1(g, "Div", {bn->input(1), node1(g, "Sqrt", {node1(g, "Add", {bn->input(4), add_constant_like(g, "eps", eps)})})});
    ir::Value* w2 = scaled_weights(g, l, s, l.channels);
    ir::Value* b0 = bias_or_zero(g, l);
    ir::Value* b2 = node1(g, "Add", {node1(g, "Mul", {node1(g, "Sub", {b0, bn->input(3)}), s}), bn->input(2)});
    rebuild(g, l, bn, w2, b2);
    return true;
}

/// Conv/Gemm followed by Mul/Add with a constant that varies at most along the channel axis.
bool fold_scale_shift(ir::Graph& g, ir::Node* n) {
    if (n->num_inputs() != 2 || !n->input(0) || !n->input(1)) return false;
    int slot = is_constant_expr(n->input(1)) ? 1 : is_constant_expr(n->input(0)) ? 0 : -1;
    if (slot < 0) return false;
    ir::Value* c = n->input(static_cast<size_t>(slot));
    ir::Value* y = n->input(static_cast<size_t>(1 - slot));
    Linear l = foldable_linear(g, y, n);
    if (!l.node || c->type().dtype != y->type().dtype || !(n->output(0)->type() == y->type())) return false;
    const Shape cs = c->type().static_shape();
    const int64_t out_rank = y->type().rank();
    const int64_t chan = static_cast<int64_t>(cs.size()) - out_rank + 1;  // channel axis in c
    int64_t cm = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(cs.size()); ++i) {
        if (i == chan) cm = cs[static_cast<size_t>(i)];
        else if (cs[static_cast<size_t>(i)] != 1) return false;
    }
    ir::Value* flat = node1(g, "Reshape", {c, shape_constant(g, {cm})});
    if (n->op() == "Mul") {
        ir::Value* b = l.node->input(2) ? node1(g, "Mul", {bias_or_zero(g, l), flat}) : nullptr;
        rebuild(g, l, n, scaled_weights(g, l, c, cm), b);
    } else {
        rebuild(g, l, n, l.node->input(1), node1(g, "Add", {bias_or_zero(g, l), flat}));
    }
    return true;
}

}  // namespace

bool fold_batch_norm(ir::Graph& g, const PassContext&) {
    bool changed = false;
    for (bool again = true; again;) {
        again = false;
        for (ir::Node* n : g.nodes()) {
            bool done = n->op() == "BatchNormalization" ? fold_bn(g, n)
                        : (n->op() == "Mul" || n->op() == "Add") ? fold_scale_shift(g, n)
                                                                 : false;
            if (done) {
                again = changed = true;
                break;
            }
        }
    }
    return changed;
}

}  // namespace kiln::pass
