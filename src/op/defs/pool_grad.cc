// KilnMaxPoolGrad (internal): MaxPool's data gradient as one gather kernel, which MaxPool's and
// GlobalMaxPool's gradients (op/defs/pool.cc) emit instead of scattering through Col2Im.
//
//   KilnMaxPoolGrad(dY [N, C, O...], Indices [N, C, O...] int64) -> dX [N, C, I...]:
//     dX[n, c, i] = sum over the window offsets k with o = (i + pb - k d) / s integral and
//                   inside [0, O) of (Indices[n, c, o] == flat(n, c, i) ? dY[n, c, o] : 0)
//
// Indices are the forward's row-major flat indices (one argmax per window: the smallest flat
// index among the maxima), so each output's gradient reaches exactly one input, and an input
// that is the argmax of several overlapping windows gets their sum. Per input this reads the
// few outputs whose windows hold it (about (K / s)^2), where the Col2Im route materialized a
// [N, C, K, L] column tensor (Equal + Where) and gathered it back.
//
// Attributes: kernel_shape, strides, dilations, pads [begin..., end...] (the forward's resolved
// geometry) and input_shape (X's spatial dims).
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

std::vector<ir::TensorType> infer(const ir::Node& n) {
    const auto& dy = input_type(n, 0, "dY");
    const auto& ind = input_type(n, 1, "Indices");
    check_dtype(n, "dY", dy.dtype, float_types());
    check_dtype(n, "Indices", ind.dtype, {DType::kInt64});
    const std::vector<int64_t> in = n.attr_ints("input_shape"), k = n.attr_ints("kernel_shape");
    const size_t sp = in.size();
    KILN_CHECK(dy.is_static() && ind.is_static() && dy.static_shape() == ind.static_shape() && dy.rank() == static_cast<int>(sp) + 2 &&
                   k.size() == sp && n.attr_ints("strides").size() == sp && n.attr_ints("dilations").size() == sp &&
                   n.attr_ints("pads").size() == 2 * sp,
               kInvalidModel)
        << node_label(n) << ": dY " << dy.str() << ", Indices " << ind.str() << " and the window attributes disagree";
    Shape out = {dy.static_shape()[0], dy.static_shape()[1]};
    out.insert(out.end(), in.begin(), in.end());
    return {ir::TensorType::of_static(dy.dtype, out)};
}

std::vector<te::Tensor> compute(const ComputeArgs& a) {
    const te::Tensor &dy = a.in(0), &ind = a.in(1);
    const ir::Node& n = a.node;
    const std::vector<int64_t> in = n.attr_ints("input_shape"), kernel = n.attr_ints("kernel_shape"),
                               strides = n.attr_ints("strides"), dil = n.attr_ints("dilations"), pads = n.attr_ints("pads");
    const size_t sp = in.size();
    std::vector<te::IterVar> axes;
    for (size_t d = 0; d < sp; ++d) axes.push_back(te::reduce_axis(kernel[d], "rk" + std::to_string(d)));
    te::Tensor out = te::compute(
        a.out_shape(), [&](const std::vector<Var>& i) {
            std::vector<Expr> oi = {i[0], i[1]};
            Expr flat = Expr(i[0]) * dy->shape[1] + Expr(i[1]);
            Expr ok;
            for (size_t d = 0; d < sp; ++d) {
                flat = flat * in[d] + Expr(i[2 + d]);
                Expr t = Expr(i[2 + d]) + te::int_imm(pads[d]) - Expr(axes[d]->var) * dil[d];
                Expr o = strides[d] == 1 ? t : te::floordiv(t, te::int_imm(strides[d]));
                Expr inside = te::logical_and(t >= te::int_imm(0), o < te::int_imm(dy->shape[2 + d]));
                if (strides[d] > 1) inside = te::logical_and(inside, te::eq(te::floormod(t, te::int_imm(strides[d])), te::int_imm(0)));
                ok = ok ? te::logical_and(ok, inside) : inside;
                oi.push_back(clamp_index(o, dy->shape[2 + d]));
            }
            Expr hit = te::logical_and(ok, te::eq(te::read(ind, oi), flat));
            return te::sum(te::select(hit, te::read(dy, oi), te::make_const(dy->dtype, 0)), axes);
        },
        "max_pool_grad", a.out_dtype());
    return {out};
}

}  // namespace

void register_pool_grad_ops(OpRegistry& r) {
    OpDef d;
    d.name = "KilnMaxPoolGrad";
    d.internal = true;
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"kernel_shape", AttrKind::kInts, std::nullopt, true},
               {"strides", AttrKind::kInts, std::nullopt, true},
               {"dilations", AttrKind::kInts, std::nullopt, true},
               {"pads", AttrKind::kInts, std::nullopt, true},
               {"input_shape", AttrKind::kInts, std::nullopt, true}};
    d.infer = infer;
    d.compute = compute;
    r.add(std::move(d));
}

}  // namespace kiln::op
