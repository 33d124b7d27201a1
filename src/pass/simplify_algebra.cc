#include "pass/simplify_algebra.h"

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

bool is_reshape_like(const std::string& op) {
    return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

/// Replaces n's output 0 by v (same type) and erases n when nothing else reads it.
bool forward(ir::Graph& g, ir::Node* n, ir::Value* v) {
    if (!(n->output(0)->type() == v->type())) return false;
    if (!replace_value(g, n->output(0), v)) return false;
    bool dead = true;
    for (const ir::Value* o : n->outputs()) dead &= o->users().empty() && !is_graph_output(g, o);
    if (dead) g.erase_node(n);
    return true;
}

bool unused(const ir::Graph& g, const ir::Value* v) { return !v || (v->users().empty() && !is_graph_output(g, v)); }

/// x op c where c is a uniform constant equal to `neutral`, in slot `const_slot`.
bool neutral_operand(const ir::Node& n, size_t const_slot, double neutral) {
    auto u = uniform_constant(n.input(const_slot));
    return u && *u == neutral;
}

bool simplify_arith(ir::Graph& g, ir::Node* n) {
    const std::string& op = n->op();
    if (n->num_inputs() != 2 || !n->input(0) || !n->input(1)) return false;
    ir::Value* a = n->input(0);
    ir::Value* b = n->input(1);
    if (op == "Add" || op == "Mul") {
        double neutral = op == "Add" ? 0.0 : 1.0;
        if (neutral_operand(*n, 1, neutral) && forward(g, n, a)) return true;
        if (neutral_operand(*n, 0, neutral) && forward(g, n, b)) return true;
    }
    if ((op == "Sub" && neutral_operand(*n, 1, 0.0)) || (op == "Div" && neutral_operand(*n, 1, 1.0)) ||
        (op == "Pow" && neutral_operand(*n, 1, 1.0)))
        return forward(g, n, a);
    // (x op c1) op c2 -> x op (c1 op c2)
    if ((op == "Add" || op == "Mul") && b->is_constant() && a->producer() && a->producer()->op() == op) {
        ir::Node* inner = a->producer();
        if (sole_user(g, a) != n || inner->num_inputs() != 2) return false;
        ir::Value* x = inner->input(0);
        ir::Value* c1 = inner->input(1);
        if (!x || !c1 || x->is_constant() || !c1->is_constant()) return false;
        ir::Node* cc = add_inferred_node(g, op, {c1, b}, {}, 1, "folded");
        n->set_input(0, x);
        n->set_input(1, cc->output(0));
        g.erase_node(inner);
        g.topo_sort();
        return true;
    }
    return false;
}

bool simplify_transpose(ir::Graph& g, ir::Node* n) {
    ir::Value* x = n->input(0);
    std::vector<int64_t> perm = n->attr_ints("perm");
    int64_t rank = n->output(0)->type().rank();
    if (perm.empty())  // default: reverse the axes
        for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    bool identity = true;
    for (int64_t i = 0; i < rank; ++i) identity &= perm[static_cast<size_t>(i)] == i;
    if (identity) return forward(g, n, x);
    ir::Node* inner = x->producer();
    if (!inner || inner->op() != "Transpose") return false;
    std::vector<int64_t> p1 = inner->attr_ints("perm");
    if (p1.empty())
        for (int64_t i = rank - 1; i >= 0; --i) p1.push_back(i);
    // out[i] = x1[perm[i]] = x0[p1[perm[i]]]
    std::vector<int64_t> composed;
    for (int64_t p : perm) composed.push_back(p1[static_cast<size_t>(p)]);
    n->set_input(0, inner->input(0));
    n->attrs()["perm"] = ir::Attr(composed);
    if (unused(g, inner->output(0))) g.erase_node(inner);
    return true;
}

/// MatMul(A[b..., M, K], B[K, N]) with few rows per batch (M < 16) and more than one batch: B
/// is shared, so the batch is one matrix product over the flattened rows, Reshape(A, [rows, K])
/// x B reshaped back (both reshapes are views). torchvision's attention projections multiply
/// [seq, 1, d] activations (sequence-first, batch 1): as written, 197 products of one row each,
/// B streamed 197 times (ViT-B/16: 12 of them took 7 ms each, 97 GFLOP/s). M >= 16 (BERT's
/// [1, S, d]) stays as it is: its epilogue fuses with the product.
bool flatten_batched_rows(ir::Graph& g, ir::Node* n) {
    if (n->num_inputs() != 2 || !n->input(0) || !n->input(1)) return false;
    const ir::TensorType& a = n->input(0)->type();
    const ir::TensorType& b = n->input(1)->type();
    const ir::TensorType& y = n->output(0)->type();
    if (!a.is_static() || !b.is_static() || !y.is_static() || a.rank() < 3 || b.rank() != 2) return false;
    const Shape as = a.static_shape();
    const int64_t m = as[as.size() - 2], k = as.back();
    if (k <= 0 || m >= 16) return false;
    const int64_t rows = shape_numel(as) / k;
    if (rows == m) return false;  // a batch of one
    ir::Node* flat = add_inferred_node(g, "Reshape", {n->input(0), shape_constant(g, {rows, k})}, {}, 1, "rows");
    ir::Node* mm = add_inferred_node(g, "MatMul", {flat->output(0), n->input(1)}, {}, 1, "matmul");
    ir::Node* back = add_inferred_node(g, "Reshape", {mm->output(0), shape_constant(g, y.static_shape())}, {}, 1, "unflatten");
    mm->set_name(n->name());
    if (!replace_value(g, n->output(0), back->output(0))) {
        g.erase_node(back);
        g.erase_node(mm);
        g.erase_node(flat);
        return false;
    }
    g.topo_sort();
    g.erase_node(n);
    return true;
}

bool simplify_reshape(ir::Graph& g, ir::Node* n) {
    ir::Value* x = n->input(0);
    const ir::TensorType& out = n->output(0)->type();
    if (x->type() == out) return forward(g, n, x);
    ir::Node* inner = x->producer();
    if (!inner || !is_reshape_like(inner->op()) || !inner->input(0) || !out.is_static()) return false;
    // One Reshape from the innermost source to the final static shape.
    ir::Value* shape = shape_constant(g, out.static_shape());
    ir::Node* r = add_inferred_node(g, "Reshape", {inner->input(0), shape}, {}, 1, "reshape");
    if (!replace_value(g, n->output(0), r->output(0))) {
        g.erase_node(r);
        g.erase_constant(shape);
        return false;
    }
    g.topo_sort();
    g.erase_node(n);
    if (unused(g, inner->output(0))) g.erase_node(inner);
    return true;
}

/// AveragePool(Pad(x) by zeros on the spatial axes only): AveragePool(x) with those pads and
/// count_include_pad=1 (the padded zeros count in the divisor), one kernel and no padded copy
/// (Inception's pool branches). Each pad below the window keeps ONNX's pad < kernel rule.
bool fold_pad_into_avg_pool(ir::Graph& g, ir::Node* n) {
    ir::Value* padded = n->input(0);
    ir::Node* pad = padded ? padded->producer() : nullptr;
    if (!pad || pad->op() != "Pad" || sole_user(g, padded) != n || pad->num_inputs() > 3 || !pad->input(0)) return false;
    if (pad->attr_string("mode", "constant") != "constant" || n->attr_int("ceil_mode", 0) != 0) return false;
    if (n->attr_string("auto_pad", "NOTSET") != "NOTSET" || n->num_outputs() != 1) return false;
    if (pad->num_inputs() == 3 && pad->input(2) && uniform_constant(pad->input(2)) != 0.0) return false;
    const ir::Value* pv = pad->input(1);
    if (!pv || !pv->is_constant() || padded->type().rank() < 3) return false;  // symbolic dims too
    const int64_t rank = padded->type().rank();
    const Tensor& pt = pv->constant();
    const std::vector<int64_t> kernel = n->attr_ints("kernel_shape");
    const int64_t sp = rank - 2;
    if (pt.numel() != 2 * rank || static_cast<int64_t>(kernel.size()) != sp) return false;
    std::vector<int64_t> own = n->attr_ints("pads");
    if (own.empty()) own.assign(static_cast<size_t>(2 * sp), 0);
    std::vector<int64_t> pads(static_cast<size_t>(2 * sp));
    for (int64_t i = 0; i < rank; ++i) {
        const int64_t b = static_cast<int64_t>(pt.get_f64(i)), e = static_cast<int64_t>(pt.get_f64(i + rank));
        if (i < 2 ? (b != 0 || e != 0) : (b < 0 || e < 0)) return false;
        if (i < 2) continue;
        const size_t k = static_cast<size_t>(i - 2);
        pads[k] = b + own[k];
        pads[k + static_cast<size_t>(sp)] = e + own[k + static_cast<size_t>(sp)];
        if ((own[k] || own[k + static_cast<size_t>(sp)]) && n->attr_int("count_include_pad", 0) == 0) return false;
        if (pads[k] >= kernel[k] || pads[k + static_cast<size_t>(sp)] >= kernel[k]) return false;
    }
    n->set_input(0, pad->input(0));
    n->attrs()["pads"] = ir::Attr(pads);
    n->attrs()["count_include_pad"] = ir::Attr(int64_t{1});
    g.erase_node(pad);
    return true;
}

bool simplify_node(ir::Graph& g, ir::Node* n) {
    const std::string& op = n->op();
    if (op == "Identity" && n->input(0)) return forward(g, n, n->input(0));
    if (op == "Dropout" && n->input(0)) {
        ir::Value* mode = n->input(2);
        bool inference = !mode || (mode->is_constant() && uniform_constant(mode) == 0.0);
        if (inference && (n->num_outputs() < 2 || unused(g, n->output(1)))) return forward(g, n, n->input(0));
        return false;
    }
    if (op == "Cast" && n->input(0) && n->input(0)->type() == n->output(0)->type()) return forward(g, n, n->input(0));
    // A Concat of one input, or a Pad by zeros everywhere (DenseNet's transition pools): copies.
    if (op == "Concat" && n->num_inputs() == 1 && n->input(0)) return forward(g, n, n->input(0));
    if (op == "Pad" && n->num_inputs() >= 2 && n->input(0) && uniform_constant(n->input(1)) == 0.0)
        return forward(g, n, n->input(0));
    if (op == "AveragePool" && n->input(0) && fold_pad_into_avg_pool(g, n)) return true;
    if (op == "Transpose" && n->input(0)) return simplify_transpose(g, n);
    if (op == "MatMul" && flatten_batched_rows(g, n)) return true;
    if (is_reshape_like(op) && n->input(0)) return simplify_reshape(g, n);
    return simplify_arith(g, n);
}

}  // namespace

bool simplify_algebra(ir::Graph& g, const PassContext&) {
    // One rewrite at a time, then a fresh walk: a rewrite may erase nodes of the snapshot.
    // Every rewrite removes a node or shortens a chain, so this ends.
    bool changed = false;
    for (bool again = true; again;) {
        again = false;
        for (ir::Node* n : g.nodes()) {
            if (simplify_node(g, n)) {
                again = changed = true;
                break;
            }
        }
    }
    return changed;
}

}  // namespace kiln::pass
