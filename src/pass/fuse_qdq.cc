#include "pass/fuse_qdq.h"

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

bool is_q8(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

bool single_constant(const ir::Value* v) {
    return v && v->is_constant() && v->type().is_static() && shape_numel(v->type().static_shape()) == 1;
}

/// The (De)QuantizeLinear parameters of node `n` (scale input 1, zero point input 2).
struct QParams {
    ir::Value* q = nullptr;      // the 8-bit tensor (DequantizeLinear's input)
    ir::Value* scale = nullptr;
    ir::Value* zero = nullptr;   // nullptr: absent (zero)
};

/// `v` = DequantizeLinear(q, scale, zero) with 8-bit q and constant parameters, per tensor
/// (or per `axis` when `per_axis` >= 0: a 1-D scale of q's dim `per_axis`); else nullopt.
std::optional<QParams> dequantized(const ir::Value* v, int per_axis) {
    const ir::Node* n = v ? v->producer() : nullptr;
    if (!n || n->op() != "DequantizeLinear" || n->attr_int("block_size", 0) != 0) return std::nullopt;
    QParams p{n->input(0), n->input(1), n->input(2)};
    if (!is_q8(p.q->type().dtype) || !p.scale || !p.scale->is_constant() || !p.scale->type().is_static())
        return std::nullopt;
    if (p.zero && !p.zero->is_constant()) return std::nullopt;
    if (single_constant(p.scale)) return (!p.zero || single_constant(p.zero)) ? std::optional(p) : std::nullopt;
    // Per axis: W [M, ...] with axis 0 and scale [M].
    const Shape s = p.scale->type().static_shape();
    const int64_t rank = p.q->type().rank();
    int64_t axis = n->attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (per_axis < 0 || axis != per_axis || s.size() != 1 || !p.q->type().is_static() ||
        s[0] != p.q->type().static_shape()[per_axis])
        return std::nullopt;
    if (p.zero && p.zero->type().static_shape() != s) return std::nullopt;
    return p;
}

ir::Value* zero_or(ir::Graph& g, ir::Value* zero, DType t) { return zero ? zero : add_constant_like(g, "zero_point", Tensor(t, {})); }

/// The sandwich around QuantizeLinear `q`: its Conv or MatMul (through an optional Relu).
struct Sandwich {
    ir::Node* q = nullptr;
    ir::Node* relu = nullptr;
    ir::Node* conv = nullptr;  // the Conv or MatMul
    QParams x, w;
};

std::optional<Sandwich> match(const ir::Graph& g, ir::Node* q) {
    if (q->attr_int("block_size", 0) != 0 || !is_q8(q->output(0)->type().dtype)) return std::nullopt;
    if (!single_constant(q->input(1)) || (q->input(2) && !single_constant(q->input(2)))) return std::nullopt;
    Sandwich s{q};
    ir::Value* v = q->input(0);
    ir::Node* n = v->producer();
    if (n && n->op() == "Relu" && sole_user(g, v) == q) {
        s.relu = n;
        v = n->input(0);
        n = v->producer();
    }
    const bool conv = n && n->op() == "Conv", matmul = n && n->op() == "MatMul";
    if ((!conv && !matmul) || sole_user(g, v) != (s.relu ? s.relu : q)) return std::nullopt;
    if (v->type().dtype != DType::kFloat32) return std::nullopt;
    // Per channel: W's output channels (Conv [M, C/G, k...]: axis 0; MatMul B [K, N]: axis 1).
    auto x = dequantized(n->input(0), -1);
    auto w = dequantized(n->input(1), conv ? 0 : 1);
    if (!x || !w || !w->q->is_constant() || (matmul && w->q->type().rank() != 2)) return std::nullopt;
    if (conv && n->input(2) && !is_constant_expr(n->input(2))) return std::nullopt;
    s.conv = n;
    s.x = *x;
    s.w = *w;
    return s;
}

ir::Value* node1(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& ins, ir::AttrMap attrs = {}) {
    return add_inferred_node(g, op, ins, std::move(attrs), 1, "qdq")->output(0);
}

/// B_q = int32(round(B / (x_s * W_s))) as constant-only nodes (fold_constants evaluates them).
ir::Value* quantized_bias(ir::Graph& g, const Sandwich& s) {
    ir::Value* step = node1(g, "Mul", {s.x.scale, s.w.scale});
    ir::Value* r = node1(g, "Round", {node1(g, "Div", {s.conv->input(2), step})});
    return node1(g, "Cast", {r}, {{"to", ir::Attr(int64_t{6})}});  // INT32
}

void rewrite(ir::Graph& g, const Sandwich& s) {
    const DType ydt = s.q->output(0)->type().dtype;
    ir::Value* yzero = zero_or(g, s.q->input(2), ydt);
    std::vector<ir::Value*> ins = {s.x.q, s.x.scale, zero_or(g, s.x.zero, s.x.q->type().dtype),
                                   s.w.q, s.w.scale, zero_or(g, s.w.zero, s.w.q->type().dtype),
                                   s.q->input(1), yzero};
    const bool conv = s.conv->op() == "Conv";
    if (conv && s.conv->input(2)) ins.push_back(quantized_bias(g, s));
    ir::Node* qc = conv ? add_inferred_node(g, "QLinearConv", ins, s.conv->attrs(), 1, "qconv")
                        : add_inferred_node(g, "QLinearMatMul", ins, {}, 1, "qmatmul");
    qc->set_name(s.conv->name());
    ir::Value* out = qc->output(0);
    // Q(relu(v)) = max(Q(v), y_zp); saturation does it when y_zp is the type's minimum.
    const int64_t zmin = ydt == DType::kUInt8 ? 0 : -128;
    if (s.relu && yzero->constant().get_i64(0) != zmin) out = node1(g, "Max", {out, yzero});
    KILN_ICHECK(replace_value(g, s.q->output(0), out)) << "fuse_qdq: output rename";
    g.topo_sort();
    g.erase_node(s.q);
    if (s.relu) g.erase_node(s.relu);
    g.erase_node(s.conv);
}

bool same_scalar(const ir::Value* a, const ir::Value* b) {
    if (a == b) return true;
    if (!a || !b) return false;  // an absent zero point is 0, but of the node's default type
    return single_constant(a) && single_constant(b) && a->type().dtype == b->type().dtype &&
           a->constant().get_f64(0) == b->constant().get_f64(0);
}

/// Ops that only move elements (or take a max of them): they commute with a monotone map applied
/// elementwise, so with Q's parameters equal to DQ's, Q(op(DQ(x))) = op(Q(DQ(x))) = op(x).
bool moves_elements(const ir::Node& n) {
    static const char* const kOps[] = {"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"};
    for (const char* op : kOps)
        if (n.op() == op) return n.num_outputs() == 1;
    return false;
}

/// Q(op(DQ(x))) with Q's parameters equal to DQ's -> op(x) on the 8-bit tensor, for the ops of
/// moves_elements (a max commutes with a monotone map, a move with any elementwise one, and
/// Q(DQ(v)) = v): ResNet's stem pool, a transformer's head split and merge stay 8-bit.
bool fuse_movement(ir::Graph& g, ir::Node* q) {
    ir::Node* pool = q->input(0)->producer();
    if (!pool || !moves_elements(*pool) || sole_user(g, q->input(0)) != q) return false;
    auto x = dequantized(pool->input(0), -1);
    if (!x || x->q->type().dtype != q->output(0)->type().dtype || !same_scalar(x->scale, q->input(1)) ||
        !same_scalar(x->zero, q->input(2)) || x->scale->constant().get_f64(0) <= 0)
        return false;
    std::vector<ir::Value*> ins = pool->inputs();
    ins[0] = x->q;
    ir::Node* p = add_inferred_node(g, pool->op(), ins, pool->attrs(), 1, "qmove");
    p->set_name(pool->name());
    KILN_ICHECK(replace_value(g, q->output(0), p->output(0))) << "fuse_qdq: output rename";
    g.topo_sort();
    g.erase_node(q);
    g.erase_node(pool);
    return true;
}

/// True when `v`'s sole user is a QuantizeLinear (through a Relu): the sandwich rule's case.
bool feeds_quantize(const ir::Graph& g, const ir::Value* v) {
    const ir::Node* u = sole_user(g, v);
    if (u && u->op() == "Relu") u = sole_user(g, u->output(0));
    return u && u->op() == "QuantizeLinear";
}

/// A float Gemm (or a MatMul whose result is not quantized next) of DequantizeLinear(a_q) by a
/// DequantizeLinear'd constant s8 weight with zero zero points -> MatMulInteger(a_q, W_q, a_zp)
/// -> Cast(f32) -> Mul(a_s * W_s) [-> Add(C)]: an integer product with its float epilogue
/// (topi/dnnl_int8_match.h: dnnl_dqmatmul). Gemm: alpha = beta = 1, transA = 0, A 2-D, W [N, K]
/// (transB, per-axis 0) or [K, N] (per-axis 1), C a constant expression of N (or 1) elements.
bool fuse_dq_matmul(ir::Graph& g, ir::Node* n) {
    const bool gemm = n->op() == "Gemm";
    if (!gemm && (n->op() != "MatMul" || feeds_quantize(g, n->output(0)))) return false;
    const bool trans_b = gemm && n->attr_int("transB", 0) != 0;
    if (gemm && (n->attr_int("transA", 0) != 0 || n->attr_float("alpha", 1.0) != 1.0 ||
                 n->attr_float("beta", 1.0) != 1.0 || n->input(0)->type().rank() != 2))
        return false;
    auto x = dequantized(n->input(0), -1);
    auto w = dequantized(n->input(1), trans_b ? 0 : 1);
    if (!x || !w || !w->q->is_constant() || w->q->type().dtype != DType::kInt8 || w->q->type().rank() != 2 ||
        (w->zero && !uniform_constant(w->zero).has_value()) || (w->zero && *uniform_constant(w->zero) != 0) ||
        n->output(0)->type().dtype != DType::kFloat32)
        return false;
    ir::Value* c = gemm && n->num_inputs() > 2 ? n->input(2) : nullptr;
    const int64_t cols = w->q->type().static_shape()[trans_b ? 0 : 1];
    if (c && (!is_constant_expr(c) || !c->type().is_static() ||
              (shape_numel(c->type().static_shape()) != cols && shape_numel(c->type().static_shape()) != 1)))
        return false;
    ir::Value* b = trans_b ? node1(g, "Transpose", {w->q}, {{"perm", ir::Attr(std::vector<int64_t>{1, 0})}}) : w->q;
    std::vector<ir::Value*> ins = {x->q, b};
    if (x->zero) ins.push_back(x->zero);
    ir::Value* acc = node1(g, "MatMulInteger", ins);
    ir::Value* y = node1(g, "Cast", {acc}, {{"to", ir::Attr(int64_t{1})}});  // FLOAT
    y = node1(g, "Mul", {y, node1(g, "Mul", {x->scale, w->scale})});
    if (c) y = node1(g, "Add", {y, c});
    y->producer()->set_name(n->name());
    if (!replace_value(g, n->output(0), y)) return false;  // the dead new nodes go with DCE
    g.topo_sort();
    g.erase_node(n);
    return true;
}

}  // namespace

bool fuse_qdq(ir::Graph& g, const PassContext&) {
    bool changed = false;
    for (ir::Node* n : g.nodes()) {
        if (n->op() == "Gemm" || n->op() == "MatMul") {
            changed |= fuse_dq_matmul(g, n);
            continue;
        }
        if (n->op() != "QuantizeLinear") continue;
        if (std::optional<Sandwich> s = match(g, n)) {
            rewrite(g, *s);
            changed = true;
        } else {
            changed |= fuse_movement(g, n);
        }
    }
    return changed;
}

}  // namespace kiln::pass
