// BatchNormalization (inference), Softmax (opset 13: along one axis), ArgMax.
//
// BatchNormalization: per-channel stages inv = scale / sqrt(var + eps) and
// shift = B - mean * inv, then y = x * inv[c] + shift[c].
// Softmax: m = max over the axis, e = exp(x - m), s = sum of e over the axis, y = e / s.
// ArgMax: TE has no arg-reduction, so two stages: m = max over the axis, then the min (first)
// or max (select_last_index) of the positions r where x[..r..] == m.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef batch_norm_op() {
    OpDef d;
    d.name = "BatchNormalization";
    d.onnx_versions = {1, 6, 7, 9, 14, 15};
    d.min_inputs = d.max_inputs = 5;
    d.max_outputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"momentum", AttrKind::kFloat, ir::Attr(0.9)},
               {"training_mode", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        KILN_CHECK(n.attr_int("training_mode", 0) == 0, kUnsupported)
            << node_label(n) << ": training_mode=1 is not supported (inference only)";
        KILN_CHECK(n.num_outputs() == 1, kUnsupported)
            << node_label(n) << ": outputs running_mean / running_var exist only in training mode, which is not supported";
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 2, kInvalidModel)
            << node_label(n) << ": input X must have rank >= 2 (N, C, ...), got rank " << x.rank();
        const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
        for (size_t i = 1; i < 5; ++i) {
            const auto& t = input_type(n, i, names[i]);
            KILN_CHECK(t.dtype == x.dtype || dtype_is_float(t.dtype), kInvalidModel)
                << node_label(n) << ": input " << names[i] << " has dtype " << dtype_name(t.dtype);
            KILN_CHECK(t.rank() == 1 && (!t.shape[0].is_static() || !x.shape[1].is_static() || t.shape[0] == x.shape[1]),
                       kInvalidModel)
                << node_label(n) << ": input " << names[i] << " must have shape [" << x.shape[1].str() << "], got "
                << dims_str(t.shape);
        }
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), scale = a.in(1), bias = a.in(2), mean = a.in(3), var = a.in(4);
        const DType cdt = te::compute_dtype(a.out_dtype());
        const double eps = a.node.attr_float("epsilon", 1e-5);
        const int64_t c = x->shape[1];
        auto rd = [&](const te::Tensor& t, const Var& i) { return te::cast(cdt, te::read(t, {Expr(i)})); };
        te::Tensor inv = te::compute(
            {c}, [&](const std::vector<Var>& i) {
                return rd(scale, i[0]) / te::unary(te::UnaryOp::kSqrt, rd(var, i[0]) + te::make_const(cdt, eps));
            },
            "bn_inv", cdt);
        te::Tensor shift = te::compute(
            {c}, [&](const std::vector<Var>& i) { return rd(bias, i[0]) - rd(mean, i[0]) * te::read(inv, {Expr(i[0])}); },
            "bn_shift", cdt);
        te::Tensor y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                return te::read(x, i) * te::read(inv, {Expr(i[1])}) + te::read(shift, {Expr(i[1])});
            },
            "BatchNormalization", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

// Indices of x with position `axis` replaced by `at`.
std::vector<Expr> with_axis(const std::vector<Var>& i, int axis, Expr at) {
    std::vector<Expr> idx(i.begin(), i.end());
    idx[axis] = std::move(at);
    return idx;
}

OpDef softmax_op() {
    OpDef d;
    d.name = "Softmax";
    d.onnx_versions = {1, 11, 13};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, float_types());
        normalize_axis(n, n.attr_int("axis", -1), x.rank());
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), x->ndim());
        const DType cdt = te::compute_dtype(a.out_dtype());
        Shape red = x->shape;
        red[axis] = 1;
        te::IterVar r1 = te::reduce_axis(x->shape[axis], "r");
        te::Tensor m = te::compute(
            red, [&](const std::vector<Var>& i) { return te::max_reduce(te::read(x, with_axis(i, axis, r1->var)), {r1}); },
            "softmax_max", cdt);
        te::Tensor e = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                return te::unary(te::UnaryOp::kExp, te::read(x, i) - te::read(m, with_axis(i, axis, te::int_imm(0))));
            },
            "softmax_exp", cdt);
        te::IterVar r2 = te::reduce_axis(x->shape[axis], "r");
        te::Tensor s = te::compute(
            red, [&](const std::vector<Var>& i) { return te::sum(te::read(e, with_axis(i, axis, r2->var)), {r2}); },
            "softmax_sum", cdt);
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                return te::read(e, i) / te::read(s, with_axis(i, axis, te::int_imm(0)));
            },
            "Softmax", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

OpDef argmax_op() {
    OpDef d;
    d.name = "ArgMax";
    d.onnx_versions = {1, 11, 12, 13};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"keepdims", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"select_last_index", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kCommReduce;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        check_dtype(n, "data", x.dtype, numeric_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input data must have rank >= 1";
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        std::vector<ir::Dim> out = x.shape;
        if (n.attr_int("keepdims", 1) != 0)
            out[axis] = 1;
        else
            out.erase(out.begin() + axis);
        return std::vector<ir::TensorType>{{DType::kInt64, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        const bool keep = a.node.attr_int("keepdims", 1) != 0;
        const bool last = a.node.attr_int("select_last_index", 0) != 0;
        const int64_t extent = x->shape[axis];
        Shape red = x->shape;
        red[axis] = 1;
        te::IterVar r1 = te::reduce_axis(extent, "r");
        te::Tensor m = te::compute(
            red, [&](const std::vector<Var>& i) { return te::max_reduce(te::read(x, with_axis(i, axis, r1->var)), {r1}); },
            "argmax_max", te::compute_dtype(x->dtype));
        te::IterVar r2 = te::reduce_axis(extent, "r");
        te::Tensor idx = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                // Output index -> full-rank index with the axis position free.
                std::vector<Var> full;
                if (keep) {
                    full = o;
                } else {
                    full.assign(o.begin(), o.begin() + axis);
                    full.push_back(o.empty() ? te::make_var("unused") : o[0]);  // placeholder, replaced below
                    full.insert(full.end(), o.begin() + axis, o.end());
                }
                Expr hit = te::eq(te::read(x, with_axis(full, axis, r2->var)), te::read(m, with_axis(full, axis, te::int_imm(0))));
                if (last) return te::max_reduce(te::select(hit, Expr(r2->var), te::int_imm(-1)), {r2});
                return te::min_reduce(te::select(hit, Expr(r2->var), te::int_imm(extent)), {r2});
            },
            "ArgMax", DType::kInt64);
        return std::vector<te::Tensor>{idx};
    };
    return d;
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
    r.add(batch_norm_op());
    r.add(softmax_op());
    r.add(argmax_op());
}

}  // namespace kiln::op
