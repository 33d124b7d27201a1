// DeformConv (opset 19/22), 2-D: X [N, C, H, W], W [M, C/group, kH, kW],
// offset [N, G*kH*kW*2, oH, oW] (G = offset_group; channel ((g*kH + i)*kW + j)*2 + {0: h, 1: w}),
// optional B [M] and mask [N, G*kH*kW, oH, oW] (channel (g*kH + i)*kW + j; default 1).
//   y[n,m,oh,ow] = B[m] + sum_{ci, i, j} W[m,ci,i,j] * mask[n,g,i,j,oh,ow] * X~(n, c, h, w)
// with c = (m / (M/group)) * (C/group) + ci, g = c / (C/G),
//   h = oh*sH - pad_top + i*dH + offset[n,g,i,j,0,oh,ow], w likewise with the w offset,
// and X~ the bilinear sample of channel c at (h, w): taps floor + {0, 1} per axis with weights
// {1-r, r}, taps outside the image read 0 (GridSample with align_corners=1 and zero padding, as
// onnx.reference computes it). One TE reduction over (ci, i, j); the bias is a second stage.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

struct DeformGeom {
    int64_t n, c, h, w, m, cg, kh, kw, oh, ow, group, ogroup;
    std::vector<int64_t> strides, dil, pads;
};

DeformGeom deform_geom(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    const auto& wt = input_type(n, 1, "W");
    KILN_CHECK(x.rank() == 4, kUnsupported)
        << node_label(n) << ": only 2-D DeformConv (X of rank 4) is supported, got rank " << x.rank();
    check_rank(n, "W", wt.rank(), 4);
    DeformGeom g;
    g.n = static_dim(n, x.shape[0], "X");
    g.c = static_dim(n, x.shape[1], "X");
    g.h = static_dim(n, x.shape[2], "X");
    g.w = static_dim(n, x.shape[3], "X");
    g.m = static_dim(n, wt.shape[0], "W");
    g.cg = static_dim(n, wt.shape[1], "W");
    g.kh = static_dim(n, wt.shape[2], "W");
    g.kw = static_dim(n, wt.shape[3], "W");
    const std::vector<int64_t> ks = n.attr_ints("kernel_shape", {g.kh, g.kw});
    KILN_CHECK(ks.size() == 2 && ks[0] == g.kh && ks[1] == g.kw, kInvalidModel)
        << node_label(n) << ": kernel_shape must equal W's spatial shape [" << g.kh << "," << g.kw << "]";
    g.group = n.attr_int("group", 1);
    g.ogroup = n.attr_int("offset_group", 1);
    KILN_CHECK(g.group > 0 && g.ogroup > 0 && g.cg * g.group == g.c && g.m % g.group == 0 &&
                   g.c % g.ogroup == 0,
               kInvalidModel)
        << node_label(n) << ": inconsistent channels: X has " << g.c << ", W " << g.m << "x" << g.cg
        << ", group " << g.group << ", offset_group " << g.ogroup;
    g.strides = n.attr_ints("strides", {1, 1});
    g.dil = n.attr_ints("dilations", {1, 1});
    g.pads = n.attr_ints("pads", {0, 0, 0, 0});
    KILN_CHECK(g.strides.size() == 2 && g.dil.size() == 2 && g.pads.size() == 4, kInvalidModel)
        << node_label(n) << ": expected 2 strides, 2 dilations and 4 pads";
    g.oh = (g.h + g.pads[0] + g.pads[2] - ((g.kh - 1) * g.dil[0] + 1)) / g.strides[0] + 1;
    g.ow = (g.w + g.pads[1] + g.pads[3] - ((g.kw - 1) * g.dil[1] + 1)) / g.strides[1] + 1;
    KILN_CHECK(g.oh > 0 && g.ow > 0, kInvalidModel)
        << node_label(n) << ": empty output " << g.oh << "x" << g.ow;
    return g;
}

void check_shape(const ir::Node& n, size_t i, const char* what, const std::vector<int64_t>& want) {
    const auto& t = input_type(n, i, what);
    bool ok = t.rank() == static_cast<int>(want.size());
    for (size_t k = 0; ok && k < want.size(); ++k) ok = static_dim(n, t.shape[k], what) == want[k];
    KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": input " << what << " must have shape "
                                  << dims_str(to_dims(want)) << ", got " << dims_str(t.shape);
}

OpDef deform_conv_op() {
    OpDef d;
    d.name = "DeformConv";
    d.onnx_versions = {19, 22};
    d.min_inputs = 3;
    d.max_inputs = 5;
    d.attrs = {{"dilations", AttrKind::kInts, std::nullopt},
               {"group", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"kernel_shape", AttrKind::kInts, std::nullopt},
               {"offset_group", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"pads", AttrKind::kInts, std::nullopt},
               {"strides", AttrKind::kInts, std::nullopt}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        const DeformGeom g = deform_geom(n);
        const char* names[] = {"X", "W", "offset", "B", "mask"};
        for (size_t i = 1; i < 5; ++i)
            if (has_input(n, i)) check_same_dtype(n, "X", x.dtype, names[i], input_type(n, i, names[i]).dtype);
        check_shape(n, 2, "offset", {g.n, g.ogroup * g.kh * g.kw * 2, g.oh, g.ow});
        if (has_input(n, 3)) check_shape(n, 3, "B", {g.m});
        if (has_input(n, 4)) check_shape(n, 4, "mask", {g.n, g.ogroup * g.kh * g.kw, g.oh, g.ow});
        return std::vector<ir::TensorType>{{x.dtype, to_dims({g.n, g.m, g.oh, g.ow})}};
    };
    d.compute = [](const ComputeArgs& a) {
        const DeformGeom g = deform_geom(a.node);
        te::Tensor x = a.in(0), wt = a.in(1), off = a.in(2);
        const bool has_bias = a.has_input(3), has_mask = a.has_input(4);
        const DType cdt = te::compute_dtype(a.out_dtype());
        auto cf = [&](double v) { return te::make_const(cdt, v); };
        auto ci = [](int64_t v) { return te::int_imm(v); };
        const int64_t m_per_group = g.m / g.group, c_per_ogroup = g.c / g.ogroup;
        te::Tensor conv = te::compute(
            {g.n, g.m, g.oh, g.ow},
            [&](const std::vector<Var>& o) {
                te::IterVar rc = te::reduce_axis(g.cg, "rc"), ri = te::reduce_axis(g.kh, "ri"),
                            rj = te::reduce_axis(g.kw, "rj");
                const Expr c = te::floordiv(Expr(o[1]), ci(m_per_group)) * g.cg + Expr(rc->var);
                const Expr og = te::floordiv(c, ci(c_per_ogroup));
                const Expr kpos = (og * g.kh + Expr(ri->var)) * g.kw + Expr(rj->var);
                auto off_at = [&](int64_t dim) {
                    return te::cast(cdt, te::read(off, {Expr(o[0]), kpos * 2 + dim, Expr(o[2]), Expr(o[3])}));
                };
                const Expr h = te::cast(cdt, Expr(o[2]) * g.strides[0] - g.pads[0] + Expr(ri->var) * g.dil[0]) +
                               off_at(0);
                const Expr w = te::cast(cdt, Expr(o[3]) * g.strides[1] - g.pads[1] + Expr(rj->var) * g.dil[1]) +
                               off_at(1);
                const Expr hf = te::unary(te::UnaryOp::kFloor, h), wf = te::unary(te::UnaryOp::kFloor, w);
                const Expr h0 = te::cast(DType::kInt64, hf), w0 = te::cast(DType::kInt64, wf);
                const Expr lh = h - hf, lw = w - wf;
                auto tap = [&](const Expr& hi, const Expr& wi) {
                    const Expr in = te::logical_and(te::logical_and(hi >= ci(0), hi < ci(g.h)),
                                                    te::logical_and(wi >= ci(0), wi < ci(g.w)));
                    const Expr v = te::cast(
                        cdt, te::read(x, {Expr(o[0]), c, clamp_index(hi, g.h), clamp_index(wi, g.w)}));
                    return te::select(in, v, cf(0.0));
                };
                Expr sample = (cf(1.0) - lh) * ((cf(1.0) - lw) * tap(h0, w0) + lw * tap(h0, w0 + 1)) +
                              lh * ((cf(1.0) - lw) * tap(h0 + 1, w0) + lw * tap(h0 + 1, w0 + 1));
                Expr term = te::cast(cdt, te::read(wt, {Expr(o[1]), Expr(rc->var), Expr(ri->var), Expr(rj->var)})) *
                            sample;
                if (has_mask)
                    term = term * te::cast(cdt, te::read(a.in(4), {Expr(o[0]), kpos, Expr(o[2]), Expr(o[3])}));
                return te::sum(term, {rc, ri, rj});
            },
            has_bias ? "deform_conv_acc" : "DeformConv", has_bias ? cdt : a.out_dtype());
        if (!has_bias) return std::vector<te::Tensor>{conv};
        te::Tensor y = te::compute(
            a.out_shape(),
            [&](const std::vector<Var>& o) {
                return te::read(conv, o) + te::cast(cdt, te::read(a.in(3), {Expr(o[1])}));
            },
            "DeformConv", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.flops = [](const ir::Node& n) {
        const DeformGeom g = deform_geom(n);
        return 2.0 * 8.0 * static_cast<double>(g.n * g.m * g.oh * g.ow * g.cg * g.kh * g.kw);
    };
    return d;
}

}  // namespace

void register_deform_conv_ops(OpRegistry& r) { r.add(deform_conv_op()); }

}  // namespace kiln::op
