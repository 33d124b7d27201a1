// Order-dependent ops along one axis: CumSum and TopK, as reductions with selects (O(n^2) per
// line; no sort or scan primitive in TE — fine for the line lengths these ops see in practice).
//
// CumSum (axis from a constant input): y[..i..] = sum over r of select(in_range(r, i), x[..r..], 0)
// with in_range r <= i (default), r < i (exclusive), r >= i (reverse), r > i (both).
// TopK (k from a constant input; opset 1's attribute is moved there by the importer):
//   rank[..j..] = #{r : x[r] beats x[j]}, beats = (largest ? x[r] > x[j] : x[r] < x[j]) or
//                 (x[r] == x[j] and r < j)           (a total order: ties keep the lower index)
//   Indices[..p..] = the j whose rank is p            (sum over j of select(rank == p, j, 0))
//   Values[..p..]  = x[..Indices[..p..]..]
// Output is always sorted (sorted=0 leaves the order unspecified, so sorted order is valid).
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

std::vector<Expr> with_axis(const std::vector<Var>& i, int axis, Expr at) {
    std::vector<Expr> idx(i.begin(), i.end());
    idx[axis] = std::move(at);
    return idx;
}

// The single value of constant integer input `slot`.
int64_t scalar_input(const ir::Node& n, size_t slot, const char* what) {
    std::vector<int64_t> v = constant_ints(n, slot, what);
    KILN_CHECK(v.size() == 1, kInvalidModel)
        << node_label(n) << ": input " << what << " must hold one value, got " << v.size();
    return v[0];
}

OpDef cumsum_op() {
    OpDef d;
    d.name = "CumSum";
    d.onnx_versions = {11, 14};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"exclusive", AttrKind::kInt, ir::Attr(int64_t{0})}, {"reverse", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "x");
        std::vector<DType> types = float_types();
        for (DType t : {DType::kInt32, DType::kInt64, DType::kUInt32, DType::kUInt64}) types.push_back(t);
        check_dtype(n, "x", x.dtype, types);
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input x must have rank >= 1, got rank 0";
        normalize_axis(n, scalar_input(n, 1, "axis"), x.rank(), "axis");
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, scalar_input(a.node, 1, "axis"), x->ndim(), "axis");
        const bool exclusive = a.node.attr_int("exclusive", 0) != 0;
        const bool reverse = a.node.attr_int("reverse", 0) != 0;
        const DType cdt = te::compute_dtype(x->dtype);
        te::IterVar r = te::reduce_axis(x->shape[axis], "r");
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                Expr rv = r->var, iv = i[axis];
                Expr in_range = reverse ? (exclusive ? rv > iv : rv >= iv) : (exclusive ? rv < iv : rv <= iv);
                Expr v = te::cast(cdt, te::read(x, with_axis(i, axis, rv)));
                return te::sum(te::select(in_range, v, te::make_const(cdt, 0)), {r});
            },
            "CumSum", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

OpDef topk_op() {
    OpDef d;
    d.name = "TopK";
    d.onnx_versions = {1, 10, 11};
    d.min_inputs = d.max_inputs = 2;
    d.min_outputs = d.max_outputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})},
               {"largest", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"sorted", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, numeric_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input X must have rank >= 1, got rank 0";
        const int axis = normalize_axis(n, n.attr_int("axis", -1), x.rank());
        const int64_t k = scalar_input(n, 1, "K");
        const int64_t extent = static_dim(n, x.shape[axis], "X");
        KILN_CHECK(k >= 0 && k <= extent, kInvalidModel)
            << node_label(n) << ": K=" << k << " must be in [0, " << extent << "] (the size of axis " << axis << ")";
        std::vector<ir::Dim> out = x.shape;
        out[axis] = k;
        return std::vector<ir::TensorType>{{x.dtype, out}, {DType::kInt64, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), x->ndim());
        const bool largest = a.node.attr_int("largest", 1) != 0;
        const int64_t n = x->shape[axis];
        te::IterVar r = te::reduce_axis(n, "r");
        te::Tensor rank = te::compute(
            x->shape, [&](const std::vector<Var>& j) {
                Expr xr = te::read(x, with_axis(j, axis, r->var));
                Expr xj = te::read(x, j);
                Expr better = largest ? xr > xj : xr < xj;
                Expr beats = te::logical_or(better, te::logical_and(te::eq(xr, xj), Expr(r->var) < Expr(j[axis])));
                return te::sum(te::select(beats, te::int_imm(1), te::int_imm(0)), {r});
            },
            "topk_rank", DType::kInt64);
        te::IterVar rj = te::reduce_axis(n, "j");
        te::Tensor indices = te::compute(
            a.out_shape(1), [&](const std::vector<Var>& p) {
                Expr hit = te::eq(te::read(rank, with_axis(p, axis, rj->var)), Expr(p[axis]));
                return te::sum(te::select(hit, Expr(rj->var), te::int_imm(0)), {rj});
            },
            "TopK_indices", DType::kInt64);
        te::Tensor values = te::compute(
            a.out_shape(0), [&](const std::vector<Var>& p) {
                return te::read(x, with_axis(p, axis, clamp_index(te::read(indices, p), n)));
            },
            "TopK_values", a.out_dtype(0));
        return std::vector<te::Tensor>{values, indices};
    };
    return d;
}

}  // namespace

void register_scan_ops(OpRegistry& r) {
    r.add(cumsum_op());
    r.add(topk_op());
}

}  // namespace kiln::op
