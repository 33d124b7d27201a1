// RoiAlign (opset 16/22), following onnx.reference.ops.op_roi_align: X [N, C, H, W], rois
// [R, 4] (x1, y1, x2, y2), batch_indices [R] -> Y [R, C, output_height, output_width].
//
// Per ROI (f64): start = roi * spatial_scale - off (off = 0.5 for half_pixel, 0 for
// output_half_pixel, which also forces the ROI size to >= 1); bin = size / pooled; the sampling
// grid per bin is g = sampling_ratio, or ceil(size / pooled) when sampling_ratio is 0 (adaptive).
// Sample (iy, ix) of bin (ph, pw) sits at y = start_y + ph bin_h + (iy + 0.5) bin_h / g_h (x
// alike). A sample outside [-1, H] x [-1, W] is worth 0; else it is bilinear between its clamped
// neighbours with weights w1..w4. avg: sum over the g_h x g_w samples of sum_i w_i v_i, divided
// by max(g_h g_w, 1); max: the maximum over samples of max_i (w_i v_i) (the reference's max mode
// takes the maximum of the *weighted* corners, not of the interpolated value). No samples
// (g <= 0, a negative half_pixel ROI): 0.
//
// The adaptive grid depends on ROI values, but TE reduce extents are static. Making rois a
// value input would recompile per ROI set (ROIs usually come from a detector head at run time),
// so instead the reduction runs over a static grid and masks samples beyond each ROI's own count:
//  - sampling_ratio > 0: the grid is sampling_ratio^2, exact;
//  - constant rois: the largest per-ROI grid (+1 of slack for rounding), masked per ROI;
//  - runtime rois: a *window* of H + 4 rows (W + 4 columns) starting at iy0, the first sample
//    at or above y = -1 (minus 1 for rounding). For g >= 1 the sample spacing is bin / ceil(bin)
//    in (0.5, 1] and exceeds (g-1)/g, so at most H + 2 samples of a bin fall inside [-1, H]; the
//    window therefore holds every sample that is not worth 0. avg ignores the rest (they add 0).
//    max mode must still see their 0: when samples lie outside the window (iy0 > 0 or the
//    window ends before g), the result is max(window max, 0).
// Sums run in f64 (stage RoiAlign_acc), then the average / max fix-up and the cast.
//
// Opset 10 (no coordinate_transformation_mode; it behaved as output_half_pixel, while the
// canonical default is half_pixel) is not claimed: the node does not carry its opset, so that
// needs an importer adapter setting the attribute.
#include <algorithm>
#include <cmath>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr DType kF64 = DType::kFloat64;

Expr c64(double v) { return te::float_imm(v, kF64); }
Expr i64(int64_t v) { return te::int_imm(v); }

struct Params {
    bool half_pixel = true, is_max = false;
    int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
    double scale = 1.0;
};

Params params(const ir::Node& n) {
    Params p;
    const std::string ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
    KILN_CHECK(ctm == "half_pixel" || ctm == "output_half_pixel", kInvalidModel)
        << node_label(n) << ": coordinate_transformation_mode must be half_pixel or output_half_pixel, got '" << ctm
        << "'";
    const std::string mode = n.attr_string("mode", "avg");
    KILN_CHECK(mode == "avg" || mode == "max", kInvalidModel)
        << node_label(n) << ": mode must be avg or max, got '" << mode << "'";
    p.half_pixel = ctm == "half_pixel";
    p.is_max = mode == "max";
    p.out_h = n.attr_int("output_height", 1);
    p.out_w = n.attr_int("output_width", 1);
    p.sampling_ratio = n.attr_int("sampling_ratio", 0);
    p.scale = n.attr_float("spatial_scale", 1.0);
    KILN_CHECK(p.out_h >= 1 && p.out_w >= 1, kInvalidModel)
        << node_label(n) << ": output_height and output_width must be >= 1, got " << p.out_h << " and " << p.out_w;
    KILN_CHECK(p.sampling_ratio >= 0, kInvalidModel)
        << node_label(n) << ": sampling_ratio must be >= 0, got " << p.sampling_ratio;
    return p;
}

// The static sampling grid along one axis.
struct GridPlan {
    int64_t extent = 1;
    bool windowed = false;
};

GridPlan grid_plan(const ir::Node& n, const Params& p, int64_t dim, int corner) {
    if (p.sampling_ratio > 0) return {p.sampling_ratio, false};
    const int64_t pooled = corner == 0 ? p.out_w : p.out_h;
    const ir::Value* rv = n.input(1);
    if (rv->is_constant()) {
        const Tensor& t = rv->constant();
        const double off = p.half_pixel ? 0.5 : 0.0;
        int64_t g = 0;
        for (int64_t r = 0; r < t.shape()[0]; ++r) {
            const double lo = t.get_f64(r * 4 + corner) * p.scale - off;
            const double hi = t.get_f64(r * 4 + corner + 2) * p.scale - off;
            const double size = p.half_pixel ? hi - lo : std::max(hi - lo, 1.0);
            const double gr = std::ceil(size / static_cast<double>(pooled));
            if (std::isfinite(gr)) g = std::max<int64_t>(g, static_cast<int64_t>(std::min(gr, 1e15)));
        }
        if (g + 1 <= dim + 4) return {g + 1, false};  // +1: slack for rounding differences
    }
    return {dim + 4, true};
}

// Per-(roi, bin) quantities along one axis.
struct AxisGeo {
    Expr start;  // coordinate of the bin's start (f64)
    Expr step;   // sample spacing (f64)
    Expr g;      // the ROI's own grid count (int64)
    Expr first;  // index of the window's first sample (int64); 0 unless windowed
};

AxisGeo axis_geo(const Params& p, const te::Tensor& rois, const Expr& roi, const Expr& bin, int corner,
                 const GridPlan& plan) {
    const int64_t pooled = corner == 0 ? p.out_w : p.out_h;
    const Expr off = c64(p.half_pixel ? 0.5 : 0.0);
    const Expr lo = te::cast(kF64, te::read(rois, std::vector<Expr>{roi, i64(corner)})) * c64(p.scale) - off;
    const Expr hi = te::cast(kF64, te::read(rois, std::vector<Expr>{roi, i64(corner + 2)})) * c64(p.scale) - off;
    Expr size = hi - lo;
    if (!p.half_pixel) size = te::max(size, c64(1.0));
    const Expr bin_size = size / c64(static_cast<double>(pooled));
    AxisGeo a;
    a.start = lo + te::cast(kF64, bin) * bin_size;
    if (p.sampling_ratio > 0) {
        a.g = i64(p.sampling_ratio);
    } else {
        // Bounded before the cast so that a wild ROI cannot overflow it.
        Expr gc = te::unary(te::UnaryOp::kCeil, bin_size);
        gc = te::min(te::max(gc, c64(-1.0)), c64(1e15));
        a.g = te::cast(DType::kInt64, gc);
    }
    const Expr g_pos = te::max(a.g, i64(1));
    a.step = te::select(a.g >= i64(1), bin_size / te::cast(kF64, g_pos), c64(1.0));
    a.first = i64(0);
    if (plan.windowed) {
        // Smallest iy with start + (iy + 0.5) step >= -1, minus 1 for rounding (bin > 0 here).
        Expr v = te::unary(te::UnaryOp::kFloor, (c64(-1.0) - a.start) / a.step - c64(0.5)) - c64(1.0);
        v = te::min(te::max(v, c64(0.0)), c64(1e15));
        a.first = te::cast(DType::kInt64, v);
    }
    return a;
}

// The reference's bilinear neighbours along one axis of extent `dim` for coordinate c (already
// known to lie in [-1, dim]): low / high indices and the weight of the high one.
struct Taps {
    Expr low, high, frac;
};

Taps taps(const Expr& c, int64_t dim) {
    const Expr cc = te::min(te::max(c, c64(0.0)), c64(static_cast<double>(dim)));
    const Expr low_raw = te::cast(DType::kInt64, te::unary(te::UnaryOp::kFloor, cc));
    const Expr edge = low_raw >= i64(dim - 1);
    Taps t;
    t.low = te::select(edge, i64(dim - 1), low_raw);
    t.high = te::select(edge, i64(dim - 1), low_raw + 1);
    t.frac = te::select(edge, c64(0.0), cc - te::cast(kF64, low_raw));
    return t;
}

OpDef roi_align_op() {
    OpDef d;
    d.name = "RoiAlign";
    d.onnx_versions = {10, 16, 22};  // 10: the importer sets output_half_pixel
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"coordinate_transformation_mode", AttrKind::kString, ir::Attr(std::string("half_pixel"))},
               {"mode", AttrKind::kString, ir::Attr(std::string("avg"))},
               {"output_height", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"output_width", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"sampling_ratio", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"spatial_scale", AttrKind::kFloat, ir::Attr(1.0)}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& rois = input_type(n, 1, "rois");
        const auto& bi = input_type(n, 2, "batch_indices");
        check_dtype(n, "X", x.dtype, float_types());
        check_same_dtype(n, "X", x.dtype, "rois", rois.dtype);
        check_dtype(n, "batch_indices", bi.dtype, {DType::kInt32, DType::kInt64});
        check_rank(n, "X", x.rank(), 4);
        check_rank(n, "rois", rois.rank(), 2);
        check_rank(n, "batch_indices", bi.rank(), 1);
        const int64_t cols = static_dim(n, rois.shape[1], "rois");
        KILN_CHECK(cols == 4, kInvalidModel) << node_label(n) << ": rois must have shape [num_rois, 4], got "
                                             << dims_str(rois.shape);
        const int64_t nr = static_dim(n, rois.shape[0], "rois");
        const int64_t nb = static_dim(n, bi.shape[0], "batch_indices");
        KILN_CHECK(nr == nb, kInvalidModel) << node_label(n) << ": rois has " << nr
                                            << " rows but batch_indices has " << nb << " entries";
        for (int i = 0; i < 4; ++i) static_dim(n, x.shape[i], "X");
        const Params p = params(n);
        return std::vector<ir::TensorType>{{x.dtype, {ir::Dim(nr), x.shape[1], ir::Dim(p.out_h), ir::Dim(p.out_w)}}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor &x = a.in(0), &rois = a.in(1), &bidx = a.in(2);
        const Params p = params(a.node);
        const int64_t batch = x->shape[0], height = x->shape[2], width = x->shape[3];
        const GridPlan plan_y = grid_plan(a.node, p, height, 1), plan_x = grid_plan(a.node, p, width, 0);
        te::IterVar ry = te::reduce_axis(plan_y.extent, "iy"), rx = te::reduce_axis(plan_x.extent, "ix");
        auto acc = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                const AxisGeo gy = axis_geo(p, rois, o[0], o[2], 1, plan_y);
                const AxisGeo gx = axis_geo(p, rois, o[0], o[3], 0, plan_x);
                const Expr iy = gy.first + ry->var, ix = gx.first + rx->var;
                const Expr y = gy.start + (te::cast(kF64, iy) + c64(0.5)) * gy.step;
                const Expr xc = gx.start + (te::cast(kF64, ix) + c64(0.5)) * gx.step;
                const Expr counted = te::logical_and(iy < gy.g, ix < gx.g);
                const Expr inside =
                    te::logical_and(te::logical_and(y >= c64(-1.0), y <= c64(static_cast<double>(height))),
                                    te::logical_and(xc >= c64(-1.0), xc <= c64(static_cast<double>(width))));
                const Taps ty = taps(y, height), tx = taps(xc, width);
                const Expr b = clamp_index(te::cast(DType::kInt64, te::read(bidx, std::vector<Expr>{o[0]})), batch);
                auto v = [&](const Expr& yy, const Expr& xx) {
                    return te::cast(kF64, te::read(x, std::vector<Expr>{b, o[1], yy, xx}));
                };
                const Expr hy = c64(1.0) - ty.frac, hx = c64(1.0) - tx.frac;
                const Expr t1 = hy * hx * v(ty.low, tx.low), t2 = hy * tx.frac * v(ty.low, tx.high);
                const Expr t3 = ty.frac * hx * v(ty.high, tx.low), t4 = ty.frac * tx.frac * v(ty.high, tx.high);
                if (p.is_max) {
                    const Expr val = te::select(inside, te::max(te::max(t1, t2), te::max(t3, t4)), c64(0.0));
                    return te::max_reduce(te::select(counted, val, lowest_value(kF64)), {ry, rx});
                }
                return te::sum(te::select(te::logical_and(counted, inside), t1 + t2 + t3 + t4, c64(0.0)), {ry, rx});
            },
            "RoiAlign_acc", kF64);
        auto y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                const AxisGeo gy = axis_geo(p, rois, o[0], o[2], 1, plan_y);
                const AxisGeo gx = axis_geo(p, rois, o[0], o[3], 0, plan_x);
                const Expr s = te::read(acc, o);
                const Expr has_samples = te::logical_and(gy.g >= i64(1), gx.g >= i64(1));
                if (!p.is_max) {
                    const Expr count = te::max(gy.g * gx.g, i64(1));
                    return te::select(has_samples, s / te::cast(kF64, count), c64(0.0));
                }
                // Samples outside the window are worth 0 and still take part in the maximum.
                Expr hidden;
                auto axis_hidden = [](const AxisGeo& g, const GridPlan& plan) -> Expr {
                    if (!plan.windowed) return Expr();
                    return te::logical_or(g.first > i64(0), g.first + plan.extent < g.g);
                };
                const Expr hy = axis_hidden(gy, plan_y), hx = axis_hidden(gx, plan_x);
                if (hy && hx) hidden = te::logical_or(hy, hx);
                else hidden = hy ? hy : hx;
                const Expr m = hidden ? te::select(hidden, te::max(s, c64(0.0)), s) : s;
                return te::select(has_samples, m, c64(0.0));
            },
            "RoiAlign", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_roi_align_ops(OpRegistry& r) { r.add(roi_align_op()); }

}  // namespace kiln::op
