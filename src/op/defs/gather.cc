// Gather (opset 1/11/13): out[o[:axis], o[axis:axis+q], o[axis+q:]] =
//   data[o[:axis], idx(indices[o[axis:axis+q]]), o[axis+q:]]       (q = rank of indices)
// where idx maps a negative index i to i + data.shape[axis]. Indices are i32 or i64, data any
// dtype. Constant indices are range-checked at shape inference (kInvalidModel); runtime indices
// cannot raise from a kernel, so out-of-range values are clamped into the axis (ONNX leaves
// them undefined). Pattern kInjective (an embedding lookup is a gather of rows).
//
// Gradient (op/gradient.h), data only (indices are integers): with x viewed as [A, V, B]
// (A = dims before axis, V = the axis, B = dims after) and the K indices flattened,
//   dx[a, v, b] = sum_k [idx_k == v] * g[a, k, b] = MatMul(OneHot(idx) [V, K], g [A, K, B]),
// so repeated indices accumulate. A matrix product rather than ScatterElements with
// reduction=add: the scatter's kernel searches all K candidates per element with a compare and
// select, the same O(A V K B) work without the register-tiled schedule MatMul gets; the price is
// the [V, K] one-hot in memory.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

std::vector<ir::Value*> gather_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    if (!b.needs_grad(0)) return grads;
    const ir::TensorType& xt = b.input(0)->type();
    const Shape dims = xt.static_shape();
    const int axis = normalize_axis(b.node(), b.node().attr_int("axis", 0), static_cast<int>(dims.size()));
    int64_t before = 1, after = 1;
    for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
        if (d < axis) before *= dims[d];
        if (d > axis) after *= dims[d];
    }
    const int64_t extent = dims[axis];
    const int64_t k = shape_numel(b.input(1)->type().static_shape());
    if (k == 0 || shape_numel(dims) == 0) {
        grads[0] = b.filled(xt, 0.0);
        return grads;
    }
    Tensor off_on(xt.dtype, {2});
    off_on.set_f64(0, 0.0);
    off_on.set_f64(1, 1.0);
    ir::Value* onehot = b.emit1("OneHot", {b.reshape(b.input(1), {k}), b.ints({extent}), b.constant(std::move(off_on))},
                                {{"axis", int64_t{0}}});  // [V, K]
    ir::Value* g = b.output_grad_or_zeros(0);
    Shape g_view = before == 1 ? Shape{k, after} : Shape{before, k, after};
    grads[0] = b.reshape(b.emit1("MatMul", {onehot, b.reshape(g, g_view)}), dims);
    return grads;
}

OpDef gather_op() {
    OpDef d;
    d.name = "Gather";
    d.onnx_versions = {1, 11, 13};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& ind = input_type(n, 1, "indices");
        check_dtype(n, "data", x.dtype, all_types());
        check_dtype(n, "indices", ind.dtype, {DType::kInt32, DType::kInt64});
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input data must have rank >= 1, got rank 0";
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        const ir::Value* iv = n.input(1);
        if (iv->is_constant() && x.shape[axis].is_static()) {
            const int64_t extent = x.shape[axis].value;
            const Tensor& t = iv->constant();
            for (int64_t k = 0; k < t.numel(); ++k) {
                const int64_t v = t.get_i64(k);
                KILN_CHECK(v >= -extent && v < extent, kInvalidModel)
                    << node_label(n) << ": index " << v << " (element " << k << " of indices) is out of range for axis "
                    << axis << " of size " << extent;
            }
        }
        std::vector<ir::Dim> out(x.shape.begin(), x.shape.begin() + axis);
        out.insert(out.end(), ind.shape.begin(), ind.shape.end());
        out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), ind = a.in(1);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        const int q = ind->ndim();
        const int64_t extent = x->shape[axis];
        // A symbolic axis (x[:, 0] of [batch, seq, 384]: a classifier's first token) wraps and
        // clamps against the run-time dim.
        const Expr sym_extent = x->shape_exprs()[static_cast<size_t>(axis)];
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& o) {
                std::vector<Var> ii(o.begin() + axis, o.begin() + axis + q);
                Expr k = te::cast(DType::kInt64, te::read(ind, ii));
                std::vector<Expr> idx(o.begin(), o.begin() + axis);
                if (extent == te::kDynamicDim) {
                    k = te::select(k < te::int_imm(0), k + sym_extent, k);
                    idx.push_back(te::min(te::max(k, te::int_imm(0)), sym_extent - te::int_imm(1)));
                } else {
                    k = te::select(k < te::int_imm(0), k + extent, k);
                    idx.push_back(clamp_index(k, extent));
                }
                idx.insert(idx.end(), o.begin() + axis + q, o.end());
                return te::read(x, idx);
            },
            "Gather", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.gradient = gather_gradient;
    return d;
}

}  // namespace

void register_gather_ops(OpRegistry& r) { r.add(gather_op()); }

}  // namespace kiln::op
