#include "pass/fold_batch_norm.h"

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

ir::Value* node1(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& ins) {
    return add_inferred_node(g, op, ins, {}, 1, "bnfold")->output(0);
}

/// c reshaped to [cm, 1, ..., 1] (rank `rank`), to scale the weights' output-channel axis.
ir::Value* per_out_channel(ir::Graph& g, ir::Value* c, int64_t cm, size_t rank) {
    Shape s(rank, 1);
    s[0] = cm;
    return node1(g, "Reshape", {c, shape_constant(g, s)});
}

/// A Conv whose output is read only by `user` and whose weights (and bias) are constant.
ir::Node* foldable_conv(const ir::Graph& g, const ir::Value* v, const ir::Node* user) {
    ir::Node* conv = v->producer();
    if (!conv || conv->op() != "Conv" || sole_user(g, v) != user) return nullptr;
    if (!is_constant_expr(conv->input(1))) return nullptr;
    if (conv->input(2) && !is_constant_expr(conv->input(2))) return nullptr;
    return conv;
}

/// Replaces `old_out` (the value after the folded op) with Conv(x, w, b) and drops the old pair.
void rebuild_conv(ir::Graph& g, ir::Node* conv, ir::Node* after, ir::Value* w, ir::Value* b) {
    std::vector<ir::Value*> ins = {conv->input(0), w};
    if (b) ins.push_back(b);
    ir::Node* fused = add_inferred_node(g, "Conv", ins, conv->attrs(), 1, "conv");
    fused->set_name(conv->name());
    KILN_ICHECK(replace_value(g, after->output(0), fused->output(0))) << "fold_batch_norm: output rename";
    g.topo_sort();
    g.erase_node(after);
    g.erase_node(conv);
}

bool fold_bn(ir::Graph& g, ir::Node* bn) {
    if (bn->num_outputs() != 1 || bn->attr_int("training_mode", 0) != 0) return false;
    ir::Node* conv = foldable_conv(g, bn->input(0), bn);
    if (!conv) return false;
    const DType dt = conv->output(0)->type().dtype;
    for (size_t i = 1; i < 5; ++i)
        if (!is_constant_expr(bn->input(i)) || bn->input(i)->type().dtype != dt) return false;
    ir::Value* w = conv->input(1);
    const int64_t m = w->type().static_shape()[0];
    Tensor eps(dt, {});
    eps.set_f64(0, bn->attr_float("epsilon", 1e-5));
    ir::Value* s = node1(g, "Div", {bn->input(1), node1(g, "Sqrt", {node1(g, "Add", {bn->input(4), add_constant_like(g, "eps", eps)})})});
    ir::Value* w2 = node1(g, "Mul", {w, per_out_channel(g, s, m, w->type().rank())});
    ir::Value* b0 = conv->input(2) ? conv->input(2) : add_constant_like(g, "zero_bias", Tensor(dt, {m}));
    ir::Value* b2 = node1(g, "Add", {node1(g, "Mul", {node1(g, "Sub", {b0, bn->input(3)}), s}), bn->input(2)});
    rebuild_conv(g, conv, bn, w2, b2);
    return true;
}

/// Conv followed by Mul/Add with a constant that varies at most along the channel axis.
bool fold_scale_shift(ir::Graph& g, ir::Node* n) {
    if (n->num_inputs() != 2 || !n->input(0) || !n->input(1)) return false;
    int slot = is_constant_expr(n->input(1)) ? 1 : is_constant_expr(n->input(0)) ? 0 : -1;
    if (slot < 0) return false;
    ir::Value* c = n->input(static_cast<size_t>(slot));
    ir::Value* y = n->input(static_cast<size_t>(1 - slot));
    ir::Node* conv = foldable_conv(g, y, n);
    if (!conv || c->type().dtype != y->type().dtype || !(n->output(0)->type() == y->type())) return false;
    const Shape cs = c->type().static_shape();
    const int64_t out_rank = y->type().rank();
    const int64_t chan = static_cast<int64_t>(cs.size()) - out_rank + 1;  // channel axis in c
    int64_t cm = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(cs.size()); ++i) {
        if (i == chan) cm = cs[static_cast<size_t>(i)];
        else if (cs[static_cast<size_t>(i)] != 1) return false;
    }
    ir::Value* w = conv->input(1);
    ir::Value* b = conv->input(2);
    ir::Value* flat = node1(g, "Reshape", {c, shape_constant(g, {cm})});
    if (n->op() == "Mul") {
        ir::Value* w2 = node1(g, "Mul", {w, per_out_channel(g, c, cm, w->type().rank())});
        rebuild_conv(g, conv, n, w2, b ? node1(g, "Mul", {b, flat}) : nullptr);
    } else {
        const int64_t m = w->type().static_shape()[0];
        ir::Value* b0 = b ? b : add_constant_like(g, "zero_bias", Tensor(y->type().dtype, {m}));
        rebuild_conv(g, conv, n, w, node1(g, "Add", {b0, flat}));
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
