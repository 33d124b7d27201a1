// Resize (opset 10/11/13/18/19), following onnx.reference.ops.op_resize:
//  - Output size: from `sizes` (optionally with keep_aspect_ratio_policy not_larger/not_smaller,
//    which picks one scale for all `axes` and rounds size = int(scale * in + 0.5)), else
//    floor(scales[d] * in[d]). roi/scales/sizes are value inputs (compile-time constants).
//  - Per axis, the source coordinate x_ori of output index x comes from the
//    coordinate_transformation_mode formula, evaluated in f64 in the reference's operation order
//    (nearest-mode rounding decisions depend on exact ties). With base = ceil(x_ori) - 1 and
//    ratio = x_ori - base in (0, 1], the taps are the n input indices nearest to x_ori (ties to
//    the smaller): base + i for i in [1 - n/2, n/2], clamped into the axis (the reference pads
//    with edge values). Weights: nearest picks base or base+1 by nearest_mode; linear
//    [1-ratio, ratio]; cubic the Keys kernel with cubic_coeff_a; antialias (downscale s < 1)
//    widens the linear/cubic kernel by 1/s and normalizes; exclude_outside zeroes the weights
//    of taps outside the axis and renormalizes. tf_crop_and_resize maps through roi and yields
//    extrapolation_value where x_ori falls outside [0, in-1].
//  - Nearest is one gather stage. Linear/cubic are separable: one stage per resized axis, last
//    axis first (the reference's recursion order), final cast to X's dtype. Axes whose mapping
//    is the identity are skipped. The taps' positions and weights are computed in f64 once per
//    output index into small tables (axis_taps); the passes blend in X's compute type (f32 for
//    f16/f32, as ONNX Runtime does). tf_crop_and_resize (extrapolation) keeps the per-element
//    f64 coordinate and f64 intermediates.
//  - The 2-input form (opset 10: X, scales) uses asymmetric coordinates; its nearest rounds
//    down when upsampling and up when downsampling (ONNX Runtime's opset-10 behaviour).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "ir/dim_expr.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr DType kF64 = DType::kFloat64;

/// Everything the coordinate math needs for one node, resolved from constants and attributes.
struct ResizePlan {
    std::vector<int64_t> in, out;
    std::vector<double> scale;      // per-axis scale factor (f64 view)
    std::vector<double> out_width;  // scale * in as the reference computes it (f32 for `scales`)
    std::vector<double> roi0, roi1;
    std::string mode, ctm, nearest_mode;
    bool legacy = false;  // opset-10 two-input form
};

const Tensor* const_input(const ir::Node& n, size_t i, const char* what) {
    if (!has_input(n, i)) return nullptr;
    const ir::Value* v = n.input(i);
    KILN_CHECK(v->is_constant(), kUnsupported)
        << node_label(n) << ": input " << what << " must be a constant at compile time";
    return v->constant().numel() == 0 ? nullptr : &v->constant();
}

ResizePlan make_plan(const ir::Node& n, const std::vector<int64_t>& in) {
    ResizePlan p;
    const int r = static_cast<int>(in.size());
    p.in = in;
    p.legacy = n.inputs().size() == 2;
    p.mode = n.attr_string("mode", "nearest");
    p.ctm = p.legacy ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
    p.nearest_mode = p.legacy ? "legacy" : n.attr_string("nearest_mode", "round_prefer_floor");
    KILN_CHECK(p.mode == "nearest" || p.mode == "linear" || p.mode == "cubic", kInvalidModel)
        << node_label(n) << ": mode must be nearest, linear or cubic, got '" << p.mode << "'";
    static const char* const kCtm[] = {"half_pixel",         "half_pixel_symmetric",
                                       "pytorch_half_pixel", "align_corners",
                                       "asymmetric",         "tf_crop_and_resize"};
    KILN_CHECK(std::find(std::begin(kCtm), std::end(kCtm), p.ctm) != std::end(kCtm), kInvalidModel)
        << node_label(n) << ": unknown coordinate_transformation_mode '" << p.ctm << "'";
    static const char* const kNm[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil",
                                      "legacy"};
    KILN_CHECK(std::find(std::begin(kNm), std::end(kNm), p.nearest_mode) != std::end(kNm),
               kInvalidModel)
        << node_label(n) << ": unknown nearest_mode '" << p.nearest_mode << "'";
    const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
    KILN_CHECK(policy == "stretch" || policy == "not_larger" || policy == "not_smaller",
               kInvalidModel)
        << node_label(n) << ": unknown keep_aspect_ratio_policy '" << policy << "'";

    std::vector<int> axes;
    for (int64_t a : n.attr_ints("axes", {})) axes.push_back(normalize_axis(n, a, r, "axes"));
    if (axes.empty())
        for (int d = 0; d < r; ++d) axes.push_back(d);
    for (size_t i = 0; i < axes.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            KILN_CHECK(axes[i] != axes[j], kInvalidModel)
                << node_label(n) << ": axes repeats axis " << axes[i];
    const int na = static_cast<int>(axes.size());

    const Tensor* roi = p.legacy ? nullptr : const_input(n, 1, "roi");
    const Tensor* scales = const_input(n, p.legacy ? 1 : 2, "scales");
    const Tensor* sizes = p.legacy ? nullptr : const_input(n, 3, "sizes");
    KILN_CHECK((scales != nullptr) != (sizes != nullptr), kInvalidModel)
        << node_label(n) << ": exactly one of scales and sizes must be given (non-empty)";

    p.scale.assign(r, 1.0);
    p.out = in;
    p.out_width.resize(r);
    for (int d = 0; d < r; ++d) p.out_width[d] = static_cast<double>(in[d]);
    if (scales) {
        KILN_CHECK(scales->numel() == na, kInvalidModel)
            << node_label(n) << ": scales has " << scales->numel() << " elements, expected " << na;
        for (int i = 0; i < na; ++i) {
            const int d = axes[i];
            const double s = scales->get_f64(i);
            KILN_CHECK(s > 0, kInvalidModel)
                << node_label(n) << ": scales[" << i << "] must be > 0, got " << s;
            p.scale[d] = s;
            p.out[d] = static_cast<int64_t>(s * static_cast<double>(in[d]));
            // The reference multiplies the f32 scale by the Python int width in f32.
            p.out_width[d] = static_cast<double>(static_cast<float>(s) * static_cast<float>(in[d]));
        }
    } else {
        KILN_CHECK(sizes->numel() == na, kInvalidModel)
            << node_label(n) << ": sizes has " << sizes->numel() << " elements, expected " << na;
        for (int i = 0; i < na; ++i) {
            const int d = axes[i];
            p.out[d] = sizes->get_i64(i);
            KILN_CHECK(p.out[d] > 0, kInvalidModel)
                << node_label(n) << ": sizes[" << i << "] must be > 0, got " << p.out[d];
            KILN_CHECK(in[d] > 0, kInvalidModel) << node_label(n) << ": X has an empty axis " << d;
            p.scale[d] = static_cast<double>(p.out[d]) / static_cast<double>(in[d]);
        }
        if (policy != "stretch") {
            double s = p.scale[axes[0]];
            for (int d : axes)
                s = policy == "not_larger" ? std::min(s, p.scale[d]) : std::max(s, p.scale[d]);
            for (int d : axes) {
                p.scale[d] = s;
                p.out[d] = static_cast<int64_t>(s * static_cast<double>(in[d]) + 0.5);
            }
        }
        for (int d = 0; d < r; ++d) p.out_width[d] = p.scale[d] * static_cast<double>(in[d]);
    }

    p.roi0.assign(r, 0.0);
    p.roi1.assign(r, 1.0);
    if (p.ctm == "tf_crop_and_resize") {
        KILN_CHECK(roi != nullptr, kInvalidModel)
            << node_label(n)
            << ": coordinate_transformation_mode tf_crop_and_resize needs a roi input";
        KILN_CHECK(roi->numel() == 2 * na, kInvalidModel)
            << node_label(n) << ": roi has " << roi->numel() << " elements, expected " << 2 * na;
        for (int i = 0; i < na; ++i) {
            p.roi0[axes[i]] = roi->get_f64(i);
            p.roi1[axes[i]] = roi->get_f64(na + i);
        }
    }
    return p;
}

/// The coordinate-transform constants of axis d, shared by the TE and the identity check.
struct AxisMap {
    std::string ctm;
    int64_t in, out;
    double scale, ow, ow_m1, dr, start, offset;
    bool scalar;  // output width 1 in a mode that then maps to a constant
    double scalar_value;
};

AxisMap axis_map(const ResizePlan& p, int d) {
    AxisMap m;
    m.ctm = p.ctm;
    m.in = p.in[d];
    m.out = p.out[d];
    m.scale = p.scale[d];
    m.ow = p.out_width[d];
    m.ow_m1 = m.ow - 1.0;
    const double in_m1 = static_cast<double>(m.in - 1);
    m.dr = static_cast<double>(static_cast<float>(p.roi1[d]) - static_cast<float>(p.roi0[d]));
    m.start = static_cast<double>(static_cast<float>(p.roi0[d]) * static_cast<float>(m.in - 1));
    const double adjustment = static_cast<double>(m.out) / m.ow;
    m.offset = (static_cast<double>(m.in) / 2.0) * (1.0 - adjustment);
    m.scalar = false;
    m.scalar_value = 0.0;
    if (m.ow == 1.0) {
        if (m.ctm == "align_corners") m.scalar = true, m.scalar_value = 0.0;
        if (m.ctm == "pytorch_half_pixel") m.scalar = true, m.scalar_value = -0.5;
        if (m.ctm == "tf_crop_and_resize")
            m.scalar = true, m.scalar_value = m.dr * in_m1 / 2 + m.start;
    }
    return m;
}

/// x_ori for a constant x (identity detection), mirroring x_ori_expr.
double x_ori_value(const AxisMap& m, int64_t x) {
    if (m.scalar) return m.scalar_value;
    const double xf = static_cast<double>(x);
    if (m.ctm == "align_corners") return static_cast<double>(x * (m.in - 1)) / m.ow_m1;
    if (m.ctm == "asymmetric") return xf / m.scale;
    if (m.ctm == "tf_crop_and_resize")
        return xf * m.dr * static_cast<double>(m.in - 1) / m.ow_m1 + m.start;
    if (m.ctm == "half_pixel_symmetric") return m.offset + (xf + 0.5) / m.scale - 0.5;
    return (xf + 0.5) / m.scale - 0.5;  // half_pixel, pytorch_half_pixel
}

Expr c64(double v) { return te::float_imm(v, kF64); }

Expr x_ori_expr(const AxisMap& m, const Expr& x) {
    if (m.scalar) return c64(m.scalar_value);
    const Expr xf = te::cast(kF64, x);
    if (m.ctm == "align_corners") return te::cast(kF64, x * (m.in - 1)) / c64(m.ow_m1);
    if (m.ctm == "asymmetric") return xf / c64(m.scale);
    if (m.ctm == "tf_crop_and_resize")
        return xf * c64(m.dr) * c64(static_cast<double>(m.in - 1)) / c64(m.ow_m1) + c64(m.start);
    if (m.ctm == "half_pixel_symmetric")
        return c64(m.offset) + (xf + c64(0.5)) / c64(m.scale) - c64(0.5);
    return (xf + c64(0.5)) / c64(m.scale) - c64(0.5);
}

bool is_identity(const AxisMap& m) {
    if (m.in != m.out) return false;
    for (int64_t x = 0; x < m.out; ++x)
        if (x_ori_value(m, x) != static_cast<double>(x)) return false;
    return true;
}

/// Out-of-range test of tf_crop_and_resize (false for other modes).
Expr out_of_range(const AxisMap& m, const Expr& xo) {
    if (m.ctm != "tf_crop_and_resize") return nullptr;
    return te::logical_or(xo<c64(0.0), xo> c64(static_cast<double>(m.in - 1)));
}

Expr any_of(const Expr& a, const Expr& b) {
    if (!a) return b;
    if (!b) return a;
    return te::logical_or(a, b);
}

/// The input index nearest mode picks for output index x of axis m: the arithmetic of
/// nearest_compute's expression, in the same f64 operations.
int64_t nearest_index(const AxisMap& m, const std::string& nearest_mode, int64_t x) {
    const double xo = x_ori_value(m, x);
    const double base_f = std::ceil(xo) - 1.0, ratio = xo - base_f;
    const int64_t base = static_cast<int64_t>(base_f);
    bool up = true;  // "ceil", and the legacy downsample
    if (nearest_mode == "round_prefer_floor") up = ratio > 0.5;
    else if (nearest_mode == "round_prefer_ceil") up = ratio >= 0.5;
    else if (nearest_mode == "floor") up = ratio == 1.0;
    else if (nearest_mode != "ceil" && m.scale >= 1.0) up = ratio == 1.0;  // legacy upsample
    return std::clamp<int64_t>(up ? base + 1 : base, 0, m.in - 1);
}

/// When nearest mode maps every output index x of axis m to floor(x * in / out) (an integer
/// up- or downsampling: x / 2 for a 2x upsample), that index as integer arithmetic, so the
/// kernel does one shift or division instead of a double-precision coordinate, ceil and
/// compare per element (a 2x nearest upsample of [1,64,56,56] ran 15x ONNX Runtime); else null.
Expr integer_nearest(const AxisMap& m, const std::string& nearest_mode, const Expr& x) {
    if (m.scalar || m.ctm == "tf_crop_and_resize") return nullptr;
    const int64_t g = std::gcd(m.in, m.out), num = m.in / g, den = m.out / g;
    for (int64_t o = 0; o < m.out; ++o)
        if (nearest_index(m, nearest_mode, o) != o * num / den) return nullptr;
    if (den == 1) return num == 1 ? x : x * num;
    return te::floordiv(num == 1 ? x : x * num, te::int_imm(den));
}

/// Nearest: a single gather over all axes.
te::Tensor nearest_compute(const ComputeArgs& a, const ResizePlan& p) {
    te::Tensor x = a.in(0);
    const int r = static_cast<int>(p.in.size());
    const double extrap = a.node.attr_float("extrapolation_value", 0.0);
    const DType cdt = te::compute_dtype(a.out_dtype());
    return te::compute(
        p.out,
        [&](const std::vector<Var>& o) {
            std::vector<Expr> idx(o.begin(), o.end());
            Expr oob;
            for (int d = 0; d < r; ++d) {
                const AxisMap m = axis_map(p, d);
                if (is_identity(m)) continue;
                if (Expr exact = integer_nearest(m, p.nearest_mode, o[d])) {
                    idx[d] = exact;
                    continue;
                }
                const Expr xo = x_ori_expr(m, o[d]);
                oob = any_of(oob, out_of_range(m, xo));
                const Expr base_f = te::unary(te::UnaryOp::kCeil, xo) - c64(1.0);
                const Expr ratio = xo - base_f;
                const Expr base = te::cast(DType::kInt64, base_f);
                Expr up;  // choose base + 1
                const std::string& nm = p.nearest_mode;
                if (nm == "round_prefer_floor")
                    up = ratio > c64(0.5);
                else if (nm == "round_prefer_ceil")
                    up = ratio >= c64(0.5);
                else if (nm == "floor")
                    up = te::eq(ratio, c64(1.0));
                else if (nm == "ceil")
                    up = nullptr;
                else if (m.scale < 1.0)
                    up = nullptr;  // legacy downsample: ceil
                else
                    up = te::eq(ratio, c64(1.0));  // legacy upsample: floor
                const Expr pick = up ? te::select(up, base + 1, base) : base + 1;
                idx[d] = clamp_index(pick, m.in);
            }
            Expr v = te::read(x, idx);
            if (oob) v = te::select(oob, te::make_const(cdt, extrap), v);
            return v;
        },
        "Resize", a.out_dtype());
}

/// Weights of the n taps (relative positions first..first+n-1 from base) as f64 expressions.
std::vector<Expr> tap_weights(const ResizePlan& p, const AxisMap& m, const ir::Node& n,
                              const Expr& ratio, const Expr& base, int first, int taps) {
    const double A = n.attr_float("cubic_coeff_a", -0.75);
    const bool aa = n.attr_int("antialias", 0) != 0;
    std::vector<Expr> w;
    if (aa) {
        const double s = std::min(m.scale, 1.0);
        for (int i = first; i < first + taps; ++i) {
            if (p.mode == "linear") {
                const Expr arg = (c64(i) - ratio) * c64(s);
                const Expr v = c64(1.0) - te::unary(te::UnaryOp::kAbs, arg);
                w.push_back(te::min(te::max(v, c64(0.0)), c64(1.0)));
            } else {
                const Expr x = te::unary(te::UnaryOp::kAbs, c64(s) * (c64(i) - ratio));
                const Expr x2 = x * x, x3 = x * x2;
                const Expr near = c64(A + 2) * x3 - c64(A + 3) * x2 + c64(1.0);
                const Expr far = c64(A) * x3 - c64(5 * A) * x2 + c64(8 * A) * x - c64(4 * A);
                w.push_back(
                    te::select(x <= c64(1.0), near, te::select(x < c64(2.0), far, c64(0.0))));
            }
        }
    } else if (p.mode == "linear") {
        w = {c64(1.0) - ratio, ratio};
    } else {
        const Expr r1 = ratio + c64(1.0), q = c64(1.0) - ratio, q1 = q + c64(1.0);
        w.push_back(((c64(A) * r1 - c64(5 * A)) * r1 + c64(8 * A)) * r1 - c64(4 * A));
        w.push_back((c64(A + 2) * ratio - c64(A + 3)) * ratio * ratio + c64(1.0));
        w.push_back((c64(A + 2) * q - c64(A + 3)) * q * q + c64(1.0));
        w.push_back(((c64(A) * q1 - c64(5 * A)) * q1 + c64(8 * A)) * q1 - c64(4 * A));
    }
    auto normalize = [&] {
        Expr sum = w[0];
        for (size_t k = 1; k < w.size(); ++k) sum = sum + w[k];
        for (auto& e : w) e = e / sum;
    };
    if (aa) normalize();
    if (n.attr_int("exclude_outside", 0) != 0) {
        for (int k = 0; k < taps; ++k) {
            const Expr pos = base + (first + k);
            const Expr inside = te::logical_and(pos >= te::int_imm(0), pos < te::int_imm(m.in));
            w[k] = te::select(inside, w[k], c64(0.0));
        }
        normalize();
    }
    return w;
}

/// Per output index of axis m, each tap's clamped input position and weight, as small stages
/// ("Resize_pos<d>_<k>", "Resize_w<d>_<k>") computed once per call: the interpolation reads two
/// tables instead of evaluating the f64 coordinate, ceil and weights at every element (a 2x
/// linear upsample of [1,64,56,56] ran 20x ONNX Runtime).
struct AxisTaps {
    std::vector<te::Tensor> pos, weight;
};

AxisTaps axis_taps(const ComputeArgs& a, const ResizePlan& p, const AxisMap& m, int d, int first, int taps, DType cdt) {
    AxisTaps t;
    const std::string tag = std::to_string(d) + "_";
    for (int k = 0; k < taps; ++k) {
        auto tap = [&](const Var& o, bool weight) {
            const Expr xo = x_ori_expr(m, o);
            const Expr base_f = te::unary(te::UnaryOp::kCeil, xo) - c64(1.0);
            const Expr base = te::cast(DType::kInt64, base_f);
            if (!weight) return clamp_index(base + (first + k), m.in);
            return te::cast(cdt, tap_weights(p, m, a.node, xo - base_f, base, first, taps)[k]);
        };
        t.pos.push_back(te::compute(
            {m.out}, [&](const std::vector<Var>& o) { return tap(o[0], false); },
            "Resize_pos" + tag + std::to_string(k), DType::kInt64));
        t.weight.push_back(te::compute(
            {m.out}, [&](const std::vector<Var>& o) { return tap(o[0], true); },
            "Resize_w" + tag + std::to_string(k), cdt));
    }
    return t;
}

/// Linear / cubic: one interpolation stage per non-identity axis, last axis first.
te::Tensor interp_compute(const ComputeArgs& a, const ResizePlan& p) {
    te::Tensor cur = a.in(0);
    const int r = static_cast<int>(p.in.size());
    const double extrap = a.node.attr_float("extrapolation_value", 0.0);
    const bool aa = a.node.attr_int("antialias", 0) != 0;
    std::vector<int> todo;
    for (int d = r - 1; d >= 0; --d)
        if (!is_identity(axis_map(p, d))) todo.push_back(d);
    const DType cdt = te::compute_dtype(a.out_dtype());
    if (todo.empty())
        return te::compute(
            p.out, [&](const std::vector<Var>& o) { return te::read(cur, o); }, "Resize",
            a.out_dtype());
    std::vector<int64_t> shape = p.in;
    for (size_t t = 0; t < todo.size(); ++t) {
        const int d = todo[t];
        const bool last = t + 1 == todo.size();
        const AxisMap m = axis_map(p, d);
        int first = p.mode == "linear" ? 0 : -1, taps = p.mode == "linear" ? 2 : 4;
        if (aa) {
            const double s = std::min(m.scale, 1.0);
            first = static_cast<int>(std::floor((p.mode == "linear" ? -1.0 : -2.0) / s) + 1);
            taps = 2 - 2 * first;
        }
        shape[d] = p.out[d];
        const te::Tensor src = cur;
        if (m.ctm != "tf_crop_and_resize" && !m.scalar) {  // no extrapolation: taps from tables
            const AxisTaps tt = axis_taps(a, p, m, d, first, taps, cdt);
            cur = te::compute(
                shape,
                [&](const std::vector<Var>& o) {
                    Expr acc;
                    for (int k = 0; k < taps; ++k) {
                        std::vector<Expr> idx(o.begin(), o.end());
                        idx[d] = te::read(tt.pos[k], {Expr(o[d])});
                        const Expr term = te::read(tt.weight[k], {Expr(o[d])}) * te::cast(cdt, te::read(src, idx));
                        acc = acc ? acc + term : term;
                    }
                    return acc;
                },
                last ? "Resize" : "Resize_axis" + std::to_string(d), last ? a.out_dtype() : cdt);
            continue;
        }
        cur = te::compute(
            shape,
            [&](const std::vector<Var>& o) {
                const Expr xo = x_ori_expr(m, o[d]);
                const Expr base_f = te::unary(te::UnaryOp::kCeil, xo) - c64(1.0);
                const Expr ratio = xo - base_f;
                const Expr base = te::cast(DType::kInt64, base_f);
                const std::vector<Expr> w = tap_weights(p, m, a.node, ratio, base, first, taps);
                Expr acc;
                for (int k = 0; k < taps; ++k) {
                    std::vector<Expr> idx(o.begin(), o.end());
                    idx[d] = clamp_index(base + (first + k), m.in);
                    const Expr term = w[k] * te::cast(kF64, te::read(src, idx));
                    acc = acc ? acc + term : term;
                }
                if (const Expr oob = out_of_range(m, xo)) acc = te::select(oob, c64(extrap), acc);
                return last ? te::cast(cdt, acc) : acc;
            },
            last ? "Resize" : "Resize_axis" + std::to_string(d), last ? a.out_dtype() : kF64);
    }
    return cur;
}

// ---- symbolic compiles (docs/dynamic_shapes.md) ----

constexpr int64_t kStandIn = int64_t{1} << 20;  // a symbolic dim's size while checking the attributes

/// The plan at a stand-in size for symbolic dims.
ResizePlan stand_in_plan(const ir::Node& n, const std::vector<ir::Dim>& dims) {
    std::vector<int64_t> in;
    for (const ir::Dim& d : dims) in.push_back(d.is_static() ? d.value : kStandIn);
    return make_plan(n, in);
}

/// Per axis, the integer factor k of a nearest resize that reads input floor(x / k) for output
/// x (asymmetric coordinates, floor rounding or the legacy upsample's, integer scales given as
/// `scales`): the only resizes a symbolic compile builds. Empty when some axis is not such.
std::vector<int64_t> integer_upsample_factors(const ir::Node& n, const ResizePlan& p) {
    const bool floors = p.nearest_mode == "floor" || p.nearest_mode == "legacy";
    if (p.mode != "nearest" || p.ctm != "asymmetric" || !floors) return {};  // `sizes`: no integer scale at the stand-in
    std::vector<int64_t> k;
    for (double s : p.scale) {
        if (s < 1.0 || s != std::floor(s) || s > 1024) return {};
        k.push_back(static_cast<int64_t>(s));
    }
    return k;
}

/// Per axis, the integer factor k of a linear resize with integer `scales` and half_pixel,
/// pytorch_half_pixel or asymmetric coordinates (PyTorch's `Upsample(scale_factor=2,
/// mode="bilinear")`): output x reads around x_ori = (x + 0.5) / k - 0.5 (or x / k), whose
/// neighbours are clamped into the axis, so only the clamp depends on the input's size. Empty
/// when some axis is not such (align_corners: the weights depend on the size).
std::vector<int64_t> integer_linear_factors(const ResizePlan& p) {
    if (p.mode != "linear" || !(p.ctm == "half_pixel" || p.ctm == "pytorch_half_pixel" || p.ctm == "asymmetric"))
        return {};
    std::vector<int64_t> k;
    for (double s : p.scale) {
        if (s < 1.0 || s != std::floor(s) || s > 1024) return {};
        k.push_back(static_cast<int64_t>(s));
    }
    return k;
}

/// The integer factors of a resize a symbolic compile builds (nearest or linear), or empty.
std::vector<int64_t> symbolic_factors(const ir::Node& n, const ResizePlan& p) {
    std::vector<int64_t> k = integer_upsample_factors(n, p);
    return k.empty() ? integer_linear_factors(p) : k;
}

/// Output dims with symbolic input dims: k * in on an integer-upsampled axis, "?" otherwise.
std::vector<ir::Dim> symbolic_resize_dims(const ir::Node& n, const std::vector<ir::Dim>& in) {
    const ResizePlan p = stand_in_plan(n, in);
    const std::vector<int64_t> k = symbolic_factors(n, p);
    std::vector<ir::Dim> out;
    for (size_t d = 0; d < in.size(); ++d) {
        const auto poly = ir::dim_poly(in[d]);
        if (in[d].is_static()) out.push_back(ir::Dim(p.out[d]));
        else if (k.empty() || !poly) out.push_back(ir::Dim::sym("?"));
        else out.push_back(*ir::dim_of_poly(DimPoly::constant(k[d]) * *poly));
    }
    return out;
}

/// The integer nearest upsample over symbolic dims: one gather, floor(x / k) per axis.
te::Tensor sym_nearest_compute(const ComputeArgs& a) {
    te::Tensor x = a.in(0);
    std::vector<ir::Dim> in;
    for (int64_t d : x->shape) in.push_back(d == te::kDynamicDim ? ir::Dim::sym("n") : ir::Dim(d));
    const std::vector<int64_t> k = integer_upsample_factors(a.node, stand_in_plan(a.node, in));
    KILN_ICHECK(k.size() == in.size()) << node_label(a.node) << ": a symbolic Resize that is no integer upsample";
    return te::sym_compute(
        a.out_dims(), [&](const std::vector<Var>& o) {
            std::vector<Expr> idx;
            for (size_t d = 0; d < k.size(); ++d)
                idx.push_back(k[d] == 1 ? Expr(o[d]) : te::floordiv(Expr(o[d]), te::int_imm(k[d])));
            return te::read(x, idx);
        },
        "Resize", a.out_dtype());
}

/// The integer linear upsample over symbolic dims: one pass per upsampled axis (last first, as
/// the static passes), each blending the two clamped neighbours of x_ori in X's compute type.
te::Tensor sym_linear_compute(const ComputeArgs& a) {
    te::Tensor cur = a.in(0);
    std::vector<ir::Dim> in;
    for (int64_t d : cur->shape) in.push_back(d == te::kDynamicDim ? ir::Dim::sym("n") : ir::Dim(d));
    const ResizePlan p = stand_in_plan(a.node, in);
    const std::vector<int64_t> k = integer_linear_factors(p);
    KILN_ICHECK(k.size() == in.size()) << node_label(a.node) << ": a symbolic Resize that is no integer upsample";
    const DType cdt = te::compute_dtype(a.out_dtype());
    const std::vector<Expr> out = a.out_dims();
    int first = -1;  // the last pass's axis
    for (size_t d = 0; d < k.size() && first < 0; ++d)
        if (k[d] > 1) first = static_cast<int>(d);
    if (first < 0)  // every factor 1: a copy
        return te::sym_compute(
            out, [&](const std::vector<Var>& o) { return te::read(cur, std::vector<Expr>(o.begin(), o.end())); },
            "Resize", a.out_dtype());
    for (int d = static_cast<int>(k.size()) - 1; d >= 0; --d) {
        if (k[static_cast<size_t>(d)] == 1) continue;
        std::vector<Expr> dims = cur->shape_exprs();
        const Expr in_d = dims[static_cast<size_t>(d)];
        dims[static_cast<size_t>(d)] = out[static_cast<size_t>(d)];
        const bool final_pass = d == first;
        const te::Tensor src = cur;
        const Expr kf = te::make_const(cdt, static_cast<double>(k[static_cast<size_t>(d)]));
        cur = te::sym_compute(
            dims, [&, d](const std::vector<Var>& o) {
                const Expr xf = te::cast(cdt, Expr(o[static_cast<size_t>(d)]));
                const Expr half = te::make_const(cdt, 0.5);
                const Expr x = p.ctm == "asymmetric" ? xf / kf : (xf + half) / kf - half;
                const Expr fl = te::unary(te::UnaryOp::kFloor, x);
                const Expr w = x - fl;
                const Expr x0 = te::cast(DType::kInt64, fl);
                auto tap = [&](const Expr& i) {
                    std::vector<Expr> idx(o.begin(), o.end());
                    idx[static_cast<size_t>(d)] = te::max(te::min(i, in_d - te::int_imm(1)), te::int_imm(0));
                    return te::cast(cdt, te::read(src, idx));
                };
                const Expr v = (te::make_const(cdt, 1.0) - w) * tap(x0) + w * tap(x0 + te::int_imm(1));
                return final_pass ? te::cast(a.out_dtype(), v) : v;
            },
            final_pass ? "Resize" : "Resize_axis" + std::to_string(d), final_pass ? a.out_dtype() : cdt);
    }
    return cur;
}

std::vector<int64_t> static_shape(const ir::Node& n, const ir::TensorType& t) {
    std::vector<int64_t> s;
    for (const auto& d : t.shape) s.push_back(static_dim(n, d, "X"));
    return s;
}

// The interpolation passes: the leading axes (n, c) fused into the parallel loop, the others
// serial loops of known range inside (a table read at a divided parallel index kept GCC
// scalar), the last axis vectorized; the tables and nearest by default_schedule.
void resize_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        const int nd = t->ndim();
        const bool pass = t->name == "Resize" || t->name.starts_with("Resize_axis");
        if (!pass || st.is_inlined() || !stage_untouched(st) || nd < 3 || t->inputs().size() < 2) continue;
        te::IterVar f = fuse_leading(st, std::max(1, nd - 2));
        st.vectorize(st.axis(nd - 1));
        if (t->numel() > kParallelMin && f->extent > 1) st.parallel(f);
    }
    default_schedule(s, outputs);
}

OpDef resize_op() {
    OpDef d;
    d.name = "Resize";
    d.onnx_versions = {10, 11, 13, 18, 19};
    d.min_inputs = 1;
    d.max_inputs = 4;
    d.attrs = {
        {"antialias", AttrKind::kInt, ir::Attr(int64_t{0})},
        {"axes", AttrKind::kInts, std::nullopt},
        {"coordinate_transformation_mode", AttrKind::kString, ir::Attr(std::string("half_pixel"))},
        {"cubic_coeff_a", AttrKind::kFloat, ir::Attr(-0.75)},
        {"exclude_outside", AttrKind::kInt, ir::Attr(int64_t{0})},
        {"extrapolation_value", AttrKind::kFloat, ir::Attr(0.0)},
        {"keep_aspect_ratio_policy", AttrKind::kString, ir::Attr(std::string("stretch"))},
        {"mode", AttrKind::kString, ir::Attr(std::string("nearest"))},
        {"nearest_mode", AttrKind::kString, ir::Attr(std::string("round_prefer_floor"))}};
    d.value_inputs = {1, 2, 3};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        if (!x.is_static()) {
            check_dtype(n, "X", x.dtype, numeric_types());
            return std::vector<ir::TensorType>{{x.dtype, symbolic_resize_dims(n, x.shape)}};
        }
        const ResizePlan p = make_plan(n, static_shape(n, x));
        if (p.mode == "nearest") {
            check_dtype(n, "X", x.dtype, numeric_types());
        } else {
            check_dtype(n, "X", x.dtype, float_types());
        }
        KILN_CHECK(!(p.mode == "nearest" && n.attr_int("antialias", 0) != 0), kInvalidModel)
            << node_label(n) << ": antialias=1 is not defined for mode nearest";
        return std::vector<ir::TensorType>{{x.dtype, to_dims(p.out)}};
    };
    d.schedule = resize_schedule;
    d.compute = [](const ComputeArgs& a) {
        if (!a.in(0)->is_static()) {
            const bool linear = a.node.attr_string("mode", "nearest") == "linear";
            return std::vector<te::Tensor>{linear ? sym_linear_compute(a) : sym_nearest_compute(a)};
        }
        const ResizePlan p = make_plan(a.node, a.in(0)->shape);
        return std::vector<te::Tensor>{p.mode == "nearest" ? nearest_compute(a, p)
                                                           : interp_compute(a, p)};
    };
    return d;
}

// Upsample (9; deprecated since 10): exactly Resize's two-input form (X, constant scales,
// asymmetric coordinates; nearest rounds down when upsampling) with only the `mode` attribute.
OpDef upsample_op() {
    OpDef d = resize_op();
    d.name = "Upsample";
    d.onnx_versions = {9};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"mode", AttrKind::kString, ir::Attr(std::string("nearest"))}};
    d.value_inputs = {1};
    return d;
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
    r.add(resize_op());
    r.add(upsample_op());
}

}  // namespace kiln::op
