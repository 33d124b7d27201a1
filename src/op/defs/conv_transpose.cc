// ConvTranspose (N-d, groups, strides, dilations, pads, output_padding, output_shape, auto_pad)
// as a gather: each output element sums the input positions that scatter into it,
//   y[n, g*Mg + m, o] = sum over c < Cg, k of  x[n, g*Cg + c, i] * w[g*Cg + c, m, k]
//   where t = o + pad_begin - k*dilation, i = t / stride, taken only when t >= 0, t % stride == 0
//   and i < in (per spatial dim; a select zeroes the rest), then + B[g*Mg + m].
// W has shape [C, M/group, k...]. Geometry per spatial dim (eff = (k-1)*d + 1):
//   explicit / default pads: out = s*(in-1) + output_padding + eff - pb - pe;
//   output_shape given (NOTSET): total = max(0, s*(in-1) + output_padding + eff - out),
//     pb = total - total/2, pe = total/2 (the ONNX spec's split; ORT does the same);
//   SAME_UPPER / SAME_LOWER: out = in*s, total = s*(in-1) + output_padding + eff - out, split
//     floor(total/2) to the begin (UPPER) or the end (LOWER), as the ONNX reference does.
// A negative begin pad is fine in this formulation (it shifts t). Pattern kOutEWiseFusable.
#include <algorithm>
#include <string>

#include "ir/dim_expr.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/window.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

struct TransposeGeometry {
    std::vector<int64_t> kernel, strides, dilations, pads_begin, out;
};

std::vector<int64_t> per_dim(const ir::Node& n, const char* attr, size_t sp, int64_t dflt, int64_t min) {
    std::vector<int64_t> v = n.attr_ints(attr);
    if (v.empty()) return std::vector<int64_t>(sp, dflt);
    KILN_CHECK(v.size() == sp, kInvalidModel)
        << node_label(n) << ": attribute " << attr << " has " << v.size() << " entries, expected " << sp;
    for (int64_t x : v)
        KILN_CHECK(x >= min, kInvalidModel)
            << node_label(n) << ": attribute " << attr << " entries must be >= " << min << ", got " << x;
    return v;
}

TransposeGeometry geometry(const ir::Node& n, const std::vector<ir::Dim>& x, const std::vector<ir::Dim>& w) {
    KILN_CHECK(x.size() >= 3, kInvalidModel)
        << node_label(n) << ": input X must have rank >= 3 (N, C, spatial...), got rank " << x.size();
    KILN_CHECK(w.size() == x.size(), kInvalidModel)
        << node_label(n) << ": input W must have rank " << x.size() << " (like X), got rank " << w.size();
    const size_t sp = x.size() - 2;
    TransposeGeometry g;
    g.kernel = n.attr_ints("kernel_shape");
    if (g.kernel.empty())
        for (size_t i = 0; i < sp; ++i) g.kernel.push_back(static_dim(n, w[2 + i], "W"));
    KILN_CHECK(g.kernel.size() == sp, kInvalidModel)
        << node_label(n) << ": kernel_shape has " << g.kernel.size() << " entries, expected " << sp;
    for (size_t i = 0; i < sp; ++i)
        KILN_CHECK(static_dim(n, w[2 + i], "W") == g.kernel[i], kInvalidModel)
            << node_label(n) << ": kernel_shape " << dims_str(to_dims(g.kernel)) << " does not match W's shape "
            << dims_str(w);
    g.strides = per_dim(n, "strides", sp, 1, 1);
    g.dilations = per_dim(n, "dilations", sp, 1, 1);
    const std::vector<int64_t> out_pad = per_dim(n, "output_padding", sp, 0, 0);
    std::vector<int64_t> out_shape = n.attr_ints("output_shape");
    if (out_shape.size() == sp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    KILN_CHECK(out_shape.empty() || out_shape.size() == sp, kInvalidModel)
        << node_label(n) << ": output_shape has " << out_shape.size() << " entries, expected " << sp;
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    KILN_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER",
               kInvalidModel)
        << node_label(n) << ": unknown auto_pad value '" << auto_pad << "'";
    std::vector<int64_t> pads = n.attr_ints("pads");
    KILN_CHECK(pads.empty() || pads.size() == 2 * sp, kInvalidModel)
        << node_label(n) << ": attribute pads has " << pads.size() << " entries, expected " << 2 * sp;
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    for (size_t i = 0; i < sp; ++i) {
        const int64_t in = static_dim(n, x[2 + i], "X");
        const int64_t full = g.strides[i] * (in - 1) + out_pad[i] + (g.kernel[i] - 1) * g.dilations[i] + 1;
        int64_t pb = 0, pe = 0, out = 0;
        if (same || (!out_shape.empty() && pads.empty() && auto_pad == "NOTSET")) {
            out = out_shape.empty() ? in * g.strides[i] : out_shape[i];
            int64_t total = full - out;
            if (!same) total = std::max<int64_t>(0, total);
            const int64_t half = floor_div2(total);
            pb = auto_pad == "SAME_UPPER" ? half : total - half;
            pe = total - pb;
        } else {
            if (auto_pad == "NOTSET" && !pads.empty()) {
                pb = pads[i];
                pe = pads[i + sp];
            }
            out = out_shape.empty() ? full - pb - pe : out_shape[i];
        }
        KILN_CHECK(out >= 1, kInvalidModel)
            << node_label(n) << ": output size " << out << " in spatial dim " << i << " is empty";
        g.pads_begin.push_back(pb);
        g.out.push_back(out);
    }
    return g;
}

OpDef conv_transpose_op() {
    OpDef d;
    d.name = "ConvTranspose";
    d.onnx_versions = {1, 11, 22};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"auto_pad", AttrKind::kString, ir::Attr(std::string("NOTSET"))},
               {"dilations", AttrKind::kInts, std::nullopt},
               {"group", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"kernel_shape", AttrKind::kInts, std::nullopt},
               {"output_padding", AttrKind::kInts, std::nullopt},
               {"output_shape", AttrKind::kInts, std::nullopt},
               {"pads", AttrKind::kInts, std::nullopt},
               {"strides", AttrKind::kInts, std::nullopt}};
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& w = input_type(n, 1, "W");
        check_dtype(n, "X", x.dtype, float_types());
        check_same_dtype(n, "X", x.dtype, "W", w.dtype);
        // Symbolic spatial dims (a symbolic compile): the geometry at a stand-in size, then each
        // such output as an expression, s (in - 1) + output_padding + ext - pads, whose pads do
        // not depend on the size (also under SAME: total = output_padding + ext - s); with an
        // explicit output_shape they would, and the dim stays unknown.
        constexpr int64_t kStandIn = int64_t{1} << 20;
        std::vector<ir::Dim> xs = x.shape;
        for (size_t i = 2; i < xs.size(); ++i)
            if (!xs[i].is_static()) xs[i] = ir::Dim(kStandIn);
        TransposeGeometry g = geometry(n, xs, w.shape);
        const int64_t group = n.attr_int("group", 1);
        const int64_t c = static_dim(n, x.shape[1], "X");
        const int64_t wc = static_dim(n, w.shape[0], "W");
        KILN_CHECK(group >= 1 && c % group == 0 && wc == c, kInvalidModel)
            << node_label(n) << ": W's first dim (" << wc << ") must equal X's channels (" << c
            << "), divisible by group=" << group;
        const int64_t m = static_dim(n, w.shape[1], "W") * group;
        if (has_input(n, 2)) {
            const auto& b = n.input(2)->type();
            check_same_dtype(n, "X", x.dtype, "B", b.dtype);
            KILN_CHECK(b.rank() == 1 && b.shape[0].is_static() && b.shape[0].value == m, kInvalidModel)
                << node_label(n) << ": input B must have shape [" << m << "], got " << dims_str(b.shape);
        }
        std::vector<ir::Dim> out = {x.shape[0], ir::Dim(m)};
        for (size_t i = 0; i < g.out.size(); ++i) {
            const ir::Dim& in = x.shape[2 + i];
            const auto p = ir::dim_poly(in);
            if (in.is_static()) out.push_back(g.out[i]);
            else if (!p || !n.attr_ints("output_shape").empty()) out.push_back(ir::Dim::sym("?"));
            else  // the stand-in's output less s * stand-in, plus s * in
                out.push_back(*ir::dim_of_poly(DimPoly::constant(g.strides[i]) * *p +
                                               DimPoly::constant(g.out[i] - g.strides[i] * kStandIn)));
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), w = a.in(1);
        te::Tensor bias = a.has_input(2) ? a.in(2) : nullptr;
        TransposeGeometry g = geometry(a.node, to_dims(x->shape), to_dims(w->shape));
        const int sp = static_cast<int>(g.kernel.size());
        const int64_t group = a.node.attr_int("group", 1);
        const int64_t cg = x->shape[1] / group, mg = w->shape[1];
        const DType cdt = te::compute_dtype(a.out_dtype());
        te::IterVar rc = te::reduce_axis(cg, "rc");
        std::vector<te::IterVar> rk;
        for (int i = 0; i < sp; ++i) rk.push_back(te::reduce_axis(g.kernel[i], "rk" + std::to_string(i)));
        std::vector<te::IterVar> all = {rc};
        all.insert(all.end(), rk.begin(), rk.end());
        te::Tensor acc = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                Expr gi = te::floordiv(Expr(o[1]), te::int_imm(mg));
                Expr ch = gi * cg + Expr(rc->var);
                std::vector<Expr> xi = {o[0], ch};
                std::vector<Expr> wi = {ch, te::floormod(Expr(o[1]), te::int_imm(mg))};
                Expr valid;
                for (int i = 0; i < sp; ++i) {
                    const int64_t in = x->shape[2 + i], s = g.strides[i];
                    Expr t = Expr(o[2 + i]) + te::int_imm(g.pads_begin[i]) - Expr(rk[i]->var) * g.dilations[i];
                    Expr q = s == 1 ? t : te::floordiv(t, te::int_imm(s));
                    Expr ok = te::logical_and(t >= te::int_imm(0), q < te::int_imm(in));
                    if (s != 1) ok = te::logical_and(ok, te::eq(te::floormod(t, te::int_imm(s)), te::int_imm(0)));
                    valid = valid ? te::logical_and(valid, ok) : ok;
                    xi.push_back(clamp_index(q, in));
                    wi.push_back(rk[i]->var);
                }
                Expr prod = te::cast(cdt, te::read(x, xi)) * te::cast(cdt, te::read(w, wi));
                return te::sum(te::select(valid, prod, te::make_const(cdt, 0)), all);
            },
            bias ? "convtranspose_acc" : "ConvTranspose", bias ? cdt : a.out_dtype());
        if (!bias) return std::vector<te::Tensor>{acc};
        te::Tensor y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                return te::read(acc, o) + te::cast(cdt, te::read(bias, {Expr(o[1])}));
            },
            "ConvTranspose", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.flops = [](const ir::Node& n) {
        const auto& x = n.input(0)->type();
        const auto& w = n.input(1)->type();
        // Every input element scatters into (M / group) * prod(kernel) outputs: 2 flops each.
        auto dim = [](const ir::Dim& d) { return static_cast<double>(d.is_static() ? d.value : 1); };
        double f = 2.0;
        for (const auto& d : x.shape) f *= dim(d);
        for (size_t i = 1; i < w.shape.size(); ++i) f *= dim(w.shape[i]);
        return f;
    };
    return d;
}

}  // namespace

WindowGeometry conv_transpose_geometry(const ir::Node& n, const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& kernel) {
    std::vector<ir::Dim> x = {ir::Dim(1), ir::Dim(1)}, w = {ir::Dim(1), ir::Dim(1)};
    for (size_t i = 0; i < in.size(); ++i) {
        x.push_back(ir::Dim(in[i]));
        w.push_back(ir::Dim(kernel[i]));
    }
    TransposeGeometry t = geometry(n, x, w);
    WindowGeometry g{t.kernel, t.strides, t.dilations, t.pads_begin, {}, t.out};
    for (size_t i = 0; i < in.size(); ++i) {
        const int64_t full = t.strides[i] * (in[i] - 1) + (t.kernel[i] - 1) * t.dilations[i] + 1;
        g.pads_end.push_back(full - t.pads_begin[i] - t.out[i]);
    }
    return g;
}

void register_conv_transpose_ops(OpRegistry& r) { r.add(conv_transpose_op()); }

}  // namespace kiln::op
