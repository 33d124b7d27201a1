#include "pass/fuse_long_attention.h"

#include <vector>

#include "pass/eliminate_dead_code.h"
#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

constexpr int64_t kMinKeys = 512;

bool static_f32_4d(const ir::Value* v) {
    return v && v->type().dtype == DType::kFloat32 && v->type().rank() == 4 && v->type().is_static();
}

/// The node producing `v` when it is `op` and `v` has that one use (no graph output), else null.
ir::Node* sole_producer(const ir::Graph& g, const ir::Value* v, const char* op) {
    ir::Node* p = v ? v->producer() : nullptr;
    if (!p || p->op() != op || v->users().size() != 1 || is_graph_output(g, v)) return nullptr;
    return p;
}

bool fuse(ir::Graph& g, ir::Node* out) {
    if (out->op() != "MatMul" || !static_f32_4d(out->output(0))) return false;
    ir::Node* softmax = sole_producer(g, out->input(0), "Softmax");
    if (!softmax || (softmax->attr_int("axis", -1) != -1 && softmax->attr_int("axis", -1) != 3)) return false;
    ir::Value* scores = softmax->input(0);
    double scale = 1.0;
    if (ir::Node* s = scores->producer(); s && (s->op() == "Div" || s->op() == "Mul")) {
        const std::optional<double> c = s->input(1)->is_constant() ? uniform_constant(s->input(1)) : std::nullopt;
        if (!c || *c == 0.0 || s->input(1)->type().rank() > 1 || !sole_producer(g, scores, s->op().c_str())) return false;
        scale = s->op() == "Div" ? 1.0 / *c : *c;
        scores = s->input(0);
    }
    ir::Node* qk = sole_producer(g, scores, "MatMul");
    if (!qk) return false;
    ir::Value* q = qk->input(0);
    ir::Value* kt = qk->input(1);
    ir::Value* v = out->input(1);
    if (!static_f32_4d(q) || !static_f32_4d(kt) || !static_f32_4d(v) || !static_f32_4d(scores)) return false;
    const Shape qs = q->type().static_shape(), ks = kt->type().static_shape(), vs = v->type().static_shape();
    if (ks[0] != qs[0] || ks[1] != qs[1] || vs[0] != qs[0] || vs[1] != qs[1] || ks[3] < kMinKeys) return false;
    ir::Node* fused = add_inferred_node(g, "KilnBlockedAttention", {q, kt, v}, {{"scale", ir::Attr(scale)}}, 1,
                                        "attention");
    fused->set_name(out->name());
    if (!(fused->output(0)->type() == out->output(0)->type()) || !replace_value(g, out->output(0), fused->output(0))) {
        g.erase_node(fused);
        return false;
    }
    g.topo_sort();
    return true;
}

}  // namespace

bool fuse_long_attention(ir::Graph& g, const PassContext& ctx) {
    bool changed = false;
    std::vector<ir::Node*> matmuls;
    for (ir::Node* n : g.nodes())
        if (n->op() == "MatMul") matmuls.push_back(n);
    for (ir::Node* n : matmuls) changed |= fuse(g, n);
    if (changed) eliminate_dead_code(g, ctx);  // the MatMuls, scale and Softmax it replaced
    return changed;
}

}  // namespace kiln::pass
