#include "pass/pack_matmul_weights.h"

#include <map>
#include <tuple>

#include "op/defs/linear_util.h"
#include "op/schedule_util.h"
#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

bool static_f32(const ir::Value* v) {
    return v && v->type().dtype == DType::kFloat32 && v->type().is_static();
}

/// f32 with a static last dim (the contraction): symbolic rows (a symbolic compile's batch or
/// sequence, docs/dynamic_shapes.md) take the packed kernel too, its rows assumed.
bool f32_static_k(const ir::Value* v) {
    return v && v->type().dtype == DType::kFloat32 && v->type().rank() >= 1 && v->type().shape.back().is_static();
}

/// The dims as numbers, a symbolic one as op::kAssumedDim.
Shape assumed_shape(const ir::TensorType& t) {
    Shape s;
    for (const ir::Dim& d : t.shape) s.push_back(d.is_static() ? d.value : op::kAssumedDim);
    return s;
}

/// Packed weights per (B, transB, nb): matmuls sharing a weight share one packing.
using PackCache = std::map<std::tuple<const ir::Value*, bool, int64_t>, ir::Value*>;

ir::Value* packed(ir::Graph& g, ir::Value* b, bool trans_b, int64_t nb, PackCache& cache) {
    ir::Value*& p = cache[{b, trans_b, nb}];
    if (p) return p;
    const Shape bs = b->type().static_shape();
    const int64_t k = trans_b ? bs[1] : bs[0], n = trans_b ? bs[0] : bs[1];
    const int64_t blocks = (n + nb - 1) / nb, pad = blocks * nb - n;
    if (pad > 0) {
        // Zero columns up to a whole last block (the kernel never stores them), as a Concat: it
        // frees as many constant elements as it makes, so fold_constants folds it at any size.
        ir::Value* zeros = add_constant_like(g, "pack_zeros", Tensor(DType::kFloat32, trans_b ? Shape{pad, k} : Shape{k, pad}));
        b = add_inferred_node(g, "Concat", {b, zeros}, {{"axis", ir::Attr(int64_t{trans_b ? 0 : 1})}}, 1, "pack")->output(0);
    }
    Shape split = trans_b ? Shape{blocks, nb, k} : Shape{k, blocks, nb};
    std::vector<int64_t> perm = trans_b ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{1, 0, 2};
    ir::Value* r = add_inferred_node(g, "Reshape", {b, shape_constant(g, split)}, {}, 1, "pack")->output(0);
    p = add_inferred_node(g, "Transpose", {r}, {{"perm", ir::Attr(perm)}}, 1, "pack")->output(0);
    return p;
}

bool rewrite(ir::Graph& g, ir::Node* n, PackCache& cache, bool preemptible) {
    const bool gemm = n->op() == "Gemm";
    if (n->num_outputs() != 1 || (gemm && n->attr_int("transA", 0) != 0)) return false;
    ir::Value* a = n->input(0);
    ir::Value* b = n->input(1);
    ir::Value* y = n->output(0);
    if (!f32_static_k(a) || !static_f32(b) || !f32_static_k(y) || a->type().rank() < 2 || b->type().rank() != 2 ||
        !is_constant_expr(b))
        return false;
    const bool trans_b = gemm && n->attr_int("transB", 0) != 0;
    const Shape as = assumed_shape(a->type()), bs = b->type().static_shape();
    const int64_t m = as[as.size() - 2], cols = trans_b ? bs[0] : bs[1];
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < as.size(); ++d) rows *= as[d];
    if (cols < 8 || rows * cols < 64) return false;  // too small to gain from a packed panel
    int64_t nb = op::matmul_packed_block(m, cols, !a->type().shape[as.size() - 2].is_static());
    if (preemptible) nb = op::preemptible_packed_block(nb, trans_b ? bs[1] : bs[0]);
    std::vector<ir::Value*> ins = {a, packed(g, b, trans_b, nb, cache)};
    ir::AttrMap attrs = {{"n", ir::Attr(cols)}};
    if (gemm) {
        attrs["alpha"] = ir::Attr(n->attr_float("alpha", 1.0));
        attrs["beta"] = ir::Attr(n->attr_float("beta", 1.0));
        if (n->input(2)) ins.push_back(n->input(2));
    }
    ir::Node* mm = add_inferred_node(g, "KilnMatMulPackedB", ins, attrs, 1, "matmul");
    if (!(mm->output(0)->type() == y->type()) || !replace_value(g, y, mm->output(0))) {
        g.topo_sort();
        return false;  // leaves dead nodes: dead-code elimination drops them
    }
    mm->set_name(n->name());
    g.topo_sort();
    g.erase_node(n);
    return true;
}

}  // namespace

bool pack_matmul_weights(ir::Graph& g, const PassContext& ctx) {
    bool changed = false;
    PackCache cache;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "MatMul" && n->op() != "Gemm") continue;
        if (rewrite(g, n, cache, ctx.preemptible)) changed = true;
    }
    return changed;
}

}  // namespace kiln::pass
