// Softmax, LogSoftmax and Hardmax along one axis (opset 13 semantics; the importer's adapter
// coerces opset 1/11 models to 2-D first).
//
//   m = max of x over the axis                                   (stage "<op>_max")
//   Softmax:    e = exp(x - m), s = sum of e over the axis, y = e / s
//   LogSoftmax: s = sum of exp(x - m) over the axis, y = x - m - log(s)
//   Hardmax:    f = first position r along the axis with x[..r..] == m, y = (i_axis == f) ? 1 : 0
// Pattern kOpaque: chained reductions plus an elementwise epilogue form one kernel.
//
// Gradients (op/gradient.h), from the output y and its gradient g, sums over the axis:
//   Softmax:    dx = y * (g - sum(g * y))
//   LogSoftmax: dx = g - exp(y) * sum(g)
// Hardmax is piecewise constant and has none.
#include <string>

#include "op/defs/flush_subnormal.h"
#include "op/defs/row_reduce.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// Indices of x with position `axis` replaced by `at`.
std::vector<Expr> with_axis(const std::vector<Var>& i, int axis, Expr at) {
    std::vector<Expr> idx(i.begin(), i.end());
    idx[axis] = std::move(at);
    return idx;
}

std::vector<te::Tensor> softmax_compute(const ComputeArgs& a, Kind kind, const std::string& name) {
    te::Tensor x = a.in(0);
    const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), x->ndim());
    const DType cdt = te::compute_dtype(a.out_dtype());
    const int64_t extent = x->shape[axis];  // te::kDynamicDim for a symbolic axis
    const std::vector<Expr> xs = x->shape_exprs();
    // A symbolic axis (attention scores [b, h, s, s]) reduces with a symbolic reduce loop.
    const bool sym_axis = extent == te::kDynamicDim;
    auto axis_loop = [&] { return sym_axis ? te::reduce_axis(xs[axis], "r") : te::reduce_axis(extent, "r"); };
    std::vector<Expr> red = xs;
    red[axis] = te::int_imm(1);
    auto at0 = [&](const std::vector<Var>& i) { return with_axis(i, axis, te::int_imm(0)); };
    auto xv = [&](const std::vector<Expr>& idx) { return te::cast(cdt, te::read(x, idx)); };
    // Along the last axis, the row max and sum reduce in vector lanes (row_reduce.h).
    const int64_t lanes = kind == Kind::kSoftmax && axis == x->ndim() - 1 ? row_lanes(cdt, assumed(extent)) : 0;
    te::IterVar r1 = axis_loop();
    te::Tensor m =
        lanes > 0 ? lane_reduce(
                        xs, lanes, te::ReduceOp::kMax, cdt,
                        [&](const std::vector<Var>& i, Expr k) { return xv(with_axis(i, axis, k)); }, name + "_max")
                  : te::sym_compute(
                        red,
                        [&](const std::vector<Var>& i) {
                            return te::max_reduce(xv(with_axis(i, axis, r1->var)), {r1});
                        },
                        name + "_max", cdt);
    te::IterVar r2 = axis_loop();
    if (kind == Kind::kHardmax) {
        te::Tensor first = te::sym_compute(
            red, [&](const std::vector<Var>& i) {
                Expr hit = te::eq(xv(with_axis(i, axis, r2->var)), te::read(m, i));
                return te::min_reduce(te::select(hit, Expr(r2->var), xs[axis]), {r2});
            },
            name + "_first", DType::kInt64);
        te::Tensor y = te::sym_compute(
            xs, [&](const std::vector<Var>& i) {
                return te::select(te::eq(Expr(i[axis]), te::read(first, at0(i))), te::make_const(cdt, 1),
                                  te::make_const(cdt, 0));
            },
            name, a.out_dtype());
        return {y};
    }
    if (kind == Kind::kLogSoftmax) {
        te::Tensor s = te::sym_compute(
            red, [&](const std::vector<Var>& i) {
                return te::sum(te::unary(te::UnaryOp::kExp, xv(with_axis(i, axis, r2->var)) - te::read(m, i)), {r2});
            },
            name + "_sum", cdt);
        te::Tensor y = te::sym_compute(
            xs, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                return xv(idx) - te::read(m, at0(i)) - te::unary(te::UnaryOp::kLog, te::read(s, at0(i)));
            },
            name, a.out_dtype());
        return {y};
    }
    te::Tensor e = te::sym_compute(
        xs, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            return flushed_exp(xv(idx) - te::read(m, at0(i)), cdt);
        },
        name + "_exp", cdt);
    if (lanes > 0) {
        te::Tensor s = lane_reduce(
            xs, lanes, te::ReduceOp::kSum, cdt,
            [&](const std::vector<Var>& i, Expr k) { return te::read(e, with_axis(i, axis, k)); }, name + "_sum");
        // Times the row's reciprocal, which GCC hoists out of the row: a division per element
        // was a fifth of ViT's [12, 197, 197] softmax (vdivps; one rounding more, <= 1 ulp).
        te::Tensor y = te::sym_compute(
            xs,
            [&](const std::vector<Var>& i) {
                return flush_subnormal(te::read(e, i) * (te::make_const(cdt, 1) / te::read(s, at0(i))), cdt);
            },
            name, a.out_dtype());
        return {y};
    }
    te::Tensor s = te::sym_compute(
        red, [&](const std::vector<Var>& i) { return te::sum(te::read(e, with_axis(i, axis, r2->var)), {r2}); },
        name + "_sum", cdt);
    te::Tensor y = te::sym_compute(
        xs, [&](const std::vector<Var>& i) { return flush_subnormal(te::read(e, i) / te::read(s, at0(i)), cdt); }, name,
        a.out_dtype());
    return {y};
}

std::vector<ir::Value*> softmax_gradient(GradientBuilder& b, Kind kind) {
    const int axis = normalize_axis(b.node(), b.node().attr_int("axis", -1), b.input(0)->type().rank());
    ir::Value* g = b.output_grad_or_zeros(0);
    ir::Value* y = b.output(0);
    auto row_sum = [&](ir::Value* v) {
        return b.emit1("ReduceSum", {v, b.ints({axis})}, {{"keepdims", int64_t{1}}});
    };
    if (kind == Kind::kLogSoftmax)
        return {b.emit1("Sub", {g, b.emit1("Mul", {b.emit1("Exp", {y}), row_sum(g)})})};
    return {b.emit1("Mul", {y, b.emit1("Sub", {g, row_sum(b.emit1("Mul", {g, y}))})})};
}

OpDef softmax_like_op(const char* name, Kind kind) {
    OpDef d;
    d.name = name;
    d.onnx_versions = {1, 11, 13};
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input must have rank >= 1, got rank 0";
        normalize_axis(n, n.attr_int("axis", -1), x.rank());
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [kind, n = std::string(name)](const ComputeArgs& a) { return softmax_compute(a, kind, n); };
    d.schedule = row_reduce_schedule;
    if (kind != Kind::kHardmax) d.gradient = [kind](GradientBuilder& b) { return softmax_gradient(b, kind); };
    return d;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
    r.add(softmax_like_op("Hardmax", Kind::kHardmax));
    r.add(softmax_like_op("LogSoftmax", Kind::kLogSoftmax));
    r.add(softmax_like_op("Softmax", Kind::kSoftmax));
}

}  // namespace kiln::op
