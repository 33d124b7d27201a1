// KilnConvGradData and KilnConvGradWeight (internal): the two gradients of a float32 Conv as ops
// of their own, which Conv's gradient (op/defs/conv.cc) emits so that each runs as one kernel:
// oneDNN's convolution_backward_data / convolution_backward_weights primitives
// (runtime/dnnl_conv_backward.h, matched by topi/dnnl_conv_backward_match.cc), with no
// inserted zeros for a strided data gradient and the weight gradient reduced over the batch
// inside the kernel. The TE computes below are the ops' meaning: the tir interpreter's
// reference, and the generated kernel where oneDNN is absent or kernels=generated (a direct
// gather, correct but not scheduled for speed).
//
// Attributes (explicit geometry, as the forward Conv resolved it): group, strides, dilations,
// pads [begin..., end...], and the spatial extents the gradient has: input_shape (the data
// gradient's, X's spatial dims) or kernel_shape (the weight gradient's).
//
//   KilnConvGradData(dY [N, M, O...], W [M, C/G, K...]) -> dX [N, C, I...]:
//     dX[n, c, i] = sum_{m in c's group, k} dY[n, m, (i + pb - k d) / s] W[m, c mod C/G, k]
//     over the k where i + pb - k d is a multiple of s inside [0, O s).
//   KilnConvGradWeight(X [N, C, I...], dY [N, M, O...]) -> dW [M, C/G, K...]:
//     dW[m, c, k] = sum_{n, o} dY[n, m, o] Xpad[n, g C/G + c, o s + k d - pb], g = m / (M/G).
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

struct GradGeometry {
    int64_t group = 1;
    std::vector<int64_t> strides, dilations, pads_begin;
};

GradGeometry grad_geometry(const ir::Node& n, size_t sp) {
    GradGeometry g;
    g.group = n.attr_int("group", 1);
    g.strides = n.attr_ints("strides");
    g.dilations = n.attr_ints("dilations");
    const std::vector<int64_t> pads = n.attr_ints("pads");
    KILN_CHECK(g.group >= 1 && g.strides.size() == sp && g.dilations.size() == sp && pads.size() == 2 * sp, kInvalidModel)
        << node_label(n) << ": expected group >= 1 and strides, dilations (" << sp << " each) and pads (" << 2 * sp
        << ") for " << sp << " spatial dims";
    g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(sp));
    return g;
}

// Checks the two inputs (float, equal dtype, rank >= 3, static) and returns their shapes.
std::pair<Shape, Shape> grad_inputs(const ir::Node& n, const char* a_name, const char* b_name) {
    const auto& a = input_type(n, 0, a_name);
    const auto& b = input_type(n, 1, b_name);
    check_dtype(n, a_name, a.dtype, float_types());
    check_same_dtype(n, a_name, a.dtype, b_name, b.dtype);
    KILN_CHECK(a.rank() >= 3 && a.rank() == b.rank() && a.is_static() && b.is_static(), kInvalidModel)
        << node_label(n) << ": expected " << a_name << " and " << b_name << " static of one rank >= 3, got " << a.str()
        << " and " << b.str();
    return {a.static_shape(), b.static_shape()};
}

std::vector<ir::TensorType> grad_data_infer(const ir::Node& n) {
    auto [dy, w] = grad_inputs(n, "dY", "W");
    const std::vector<int64_t> in = n.attr_ints("input_shape");
    KILN_CHECK(in.size() + 2 == dy.size() && dy[1] == w[0], kInvalidModel)
        << node_label(n) << ": dY " << shape_str(dy) << ", W " << shape_str(w) << " and input_shape " << shape_str(in)
        << " disagree";
    Shape out = {dy[0], w[1] * n.attr_int("group", 1)};
    out.insert(out.end(), in.begin(), in.end());
    return {ir::TensorType::of_static(n.input(0)->type().dtype, out)};
}

std::vector<ir::TensorType> grad_weight_infer(const ir::Node& n) {
    auto [x, dy] = grad_inputs(n, "X", "dY");
    const std::vector<int64_t> k = n.attr_ints("kernel_shape");
    const int64_t group = n.attr_int("group", 1);
    KILN_CHECK(k.size() + 2 == x.size() && x[0] == dy[0] && group >= 1 && x[1] % group == 0 && dy[1] % group == 0,
               kInvalidModel)
        << node_label(n) << ": X " << shape_str(x) << ", dY " << shape_str(dy) << ", group " << group
        << " and kernel_shape " << shape_str(k) << " disagree";
    Shape out = {dy[1], x[1] / group};
    out.insert(out.end(), k.begin(), k.end());
    return {ir::TensorType::of_static(n.input(0)->type().dtype, out)};
}

std::vector<te::Tensor> grad_data_compute(const ComputeArgs& a) {
    const te::Tensor &dy = a.in(0), &w = a.in(1);
    const size_t sp = dy->shape.size() - 2;
    const GradGeometry g = grad_geometry(a.node, sp);
    const int64_t cg = w->shape[1], mg = w->shape[0] / g.group;
    te::IterVar rm = te::reduce_axis(mg, "rm");
    std::vector<te::IterVar> axes = {rm};
    for (size_t d = 0; d < sp; ++d) axes.push_back(te::reduce_axis(w->shape[2 + d], "rk" + std::to_string(d)));
    te::Tensor out = te::compute(
        a.out_shape(), [&](const std::vector<Var>& i) {
            Expr m = g.group == 1 ? Expr(rm->var) : te::floordiv(i[1], te::int_imm(cg)) * mg + Expr(rm->var);
            Expr c = g.group == 1 ? Expr(i[1]) : te::floormod(i[1], te::int_imm(cg));
            std::vector<Expr> yi = {i[0], m}, wi = {m, c};
            Expr ok;
            for (size_t d = 0; d < sp; ++d) {
                const Expr k = axes[1 + d]->var;
                wi.push_back(k);
                Expr t = Expr(i[2 + d]) + te::int_imm(g.pads_begin[d]) - k * g.dilations[d];
                Expr o = g.strides[d] == 1 ? t : te::floordiv(t, te::int_imm(g.strides[d]));
                Expr in = te::logical_and(t >= te::int_imm(0), o < te::int_imm(dy->shape[2 + d]));
                if (g.strides[d] > 1) in = te::logical_and(in, te::eq(te::floormod(t, te::int_imm(g.strides[d])), te::int_imm(0)));
                ok = ok ? te::logical_and(ok, in) : in;
                yi.push_back(clamp_index(o, dy->shape[2 + d]));
            }
            Expr v = te::read(dy, yi) * te::read(w, wi);
            return te::sum(te::select(ok, v, te::make_const(v->dtype, 0)), axes);
        },
        "conv_grad_data", a.out_dtype());
    return {out};
}

std::vector<te::Tensor> grad_weight_compute(const ComputeArgs& a) {
    const te::Tensor &x = a.in(0), &dy = a.in(1);
    const size_t sp = x->shape.size() - 2;
    const GradGeometry g = grad_geometry(a.node, sp);
    const int64_t cg = x->shape[1] / g.group, mg = dy->shape[1] / g.group;
    std::vector<te::IterVar> axes = {te::reduce_axis(x->shape[0], "rn")};
    for (size_t d = 0; d < sp; ++d) axes.push_back(te::reduce_axis(dy->shape[2 + d], "ro" + std::to_string(d)));
    te::Tensor out = te::compute(
        a.out_shape(), [&](const std::vector<Var>& i) {
            Expr c = g.group == 1 ? Expr(i[1]) : te::floordiv(i[0], te::int_imm(mg)) * cg + Expr(i[1]);
            std::vector<Expr> xi = {axes[0]->var, c}, yi = {axes[0]->var, i[0]};
            Expr ok;
            for (size_t d = 0; d < sp; ++d) {
                const Expr o = axes[1 + d]->var;
                yi.push_back(o);
                Expr p = o * g.strides[d] + Expr(i[2 + d]) * g.dilations[d] - te::int_imm(g.pads_begin[d]);
                Expr in = te::logical_and(p >= te::int_imm(0), p < te::int_imm(x->shape[2 + d]));
                ok = ok ? te::logical_and(ok, in) : in;
                xi.push_back(clamp_index(p, x->shape[2 + d]));
            }
            Expr v = te::read(dy, yi) * te::read(x, xi);
            return te::sum(te::select(ok, v, te::make_const(v->dtype, 0)), axes);
        },
        "conv_grad_weight", a.out_dtype());
    return {out};
}

// 2 * (dY elements) * (C/G * kernel elements): the forward conv's flops, both gradients.
double grad_flops(const Shape& dy, const Shape& w) {
    double per = 1;
    for (size_t i = 1; i < w.size(); ++i) per *= static_cast<double>(w[i]);
    return 2.0 * static_cast<double>(shape_numel(dy)) * per;
}

std::vector<AttrSpec> grad_attrs(const char* extent) {
    return {{"group", AttrKind::kInt, ir::Attr(int64_t{1})},
            {"strides", AttrKind::kInts, std::nullopt, true},
            {"dilations", AttrKind::kInts, std::nullopt, true},
            {"pads", AttrKind::kInts, std::nullopt, true},
            {extent, AttrKind::kInts, std::nullopt, true}};
}

}  // namespace

void register_conv_grad_ops(OpRegistry& r) {
    OpDef d;
    d.name = "KilnConvGradData";
    d.internal = true;
    d.min_inputs = d.max_inputs = 2;
    d.attrs = grad_attrs("input_shape");
    d.infer = grad_data_infer;
    d.compute = grad_data_compute;
    d.flops = [](const ir::Node& n) {
        return grad_flops(n.input(0)->type().static_shape(), n.input(1)->type().static_shape());
    };
    r.add(d);
    d.name = "KilnConvGradWeight";
    d.attrs = grad_attrs("kernel_shape");
    d.infer = grad_weight_infer;
    d.compute = grad_weight_compute;
    d.flops = [](const ir::Node& n) {
        return grad_flops(n.input(1)->type().static_shape(), n.output(0)->type().static_shape());
    };
    r.add(std::move(d));
}

}  // namespace kiln::op
