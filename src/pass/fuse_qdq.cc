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

/// Q(MaxPool(DQ(x))) with Q's parameters equal to DQ's -> MaxPool(x): the max commutes with a
/// monotone map, and Q(DQ(v)) = v.
bool fuse_max_pool(ir::Graph& g, ir::Node* q) {
    ir::Node* pool = q->input(0)->producer();
    if (!pool || pool->op() != "MaxPool" || pool->num_outputs() != 1 || sole_user(g, q->input(0)) != q) return false;
    auto x = dequantized(pool->input(0), -1);
    if (!x || x->q->type().dtype != q->output(0)->type().dtype || !same_scalar(x->scale, q->input(1)) ||
        !same_scalar(x->zero, q->input(2)) || x->scale->constant().get_f64(0) <= 0)
        return false;
    ir::Node* p = add_inferred_node(g, "MaxPool", {x->q}, pool->attrs(), 1, "qpool");
    p->set_name(pool->name());
    KILN_ICHECK(replace_value(g, q->output(0), p->output(0))) << "fuse_qdq: output rename";
    g.topo_sort();
    g.erase_node(q);
    g.erase_node(pool);
    return true;
}

}  // namespace

bool fuse_qdq(ir::Graph& g, const PassContext&) {
    bool changed = false;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "QuantizeLinear") continue;
        if (std::optional<Sandwich> s = match(g, n)) {
            rewrite(g, *s);
            changed = true;
        } else {
            changed |= fuse_max_pool(g, n);
        }
    }
    return changed;
}

}  // namespace kiln::pass
