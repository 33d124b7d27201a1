// Discrete Fourier transforms as direct O(n^2) reductions (no FFT): DFT (opset 17/20) and STFT
// (opset 17), following onnx.reference.ops.op_dft / op_stft.
//
// Signals are real ([..., 1]) or complex ([..., 2]: re, im) in the last dimension; outputs are
// complex [..., 2]. With L the transform length and theta = 2 pi ((k n) mod L) / L:
//   forward  X[k] = sum_n x[n] e^{-i theta}:  re = xr cos + xi sin,  im = xi cos - xr sin
//   inverse  x[n] = 1/L sum_k X[k] e^{+i theta}: re = xr cos - xi sin, im = xi cos + xr sin
// The index product is reduced mod L in integers before the angle is formed, and the sums run in
// f64 whatever the signal dtype (an f64 stage `*_acc`, then a cast stage): the node tests compare
// with atol 1e-5, which an f32 accumulation of large sums misses.
//  - DFT: along `axis` (input 2, default -2; the importer turns DFT-17's attribute, default 1,
//    into that input; valid axes exclude the last, complex, dimension). dft_length (input 1)
//    zero-pads or truncates the axis to L (numpy's fft n=). onesided keeps bins [0, L/2] (the
//    reference slices the output, also for an inverse transform). dft_length and axis are value
//    inputs (they shape the output).
//  - STFT: signal [B, N, 1|2]; frame f covers samples [f * frame_step, f * frame_step + L),
//    L = frame_length (input 3), else the window's length, else N; frames = 1 + (N - L) /
//    frame_step; the optional window (length L) multiplies each frame; output
//    [B, frames, onesided ? L/2 + 1 : L, 2] (onesided defaults to 1). frame_step and
//    frame_length are value inputs.
#include <algorithm>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr DType kF64 = DType::kFloat64;
constexpr double kPi = 3.14159265358979323846;

Expr c64(double v) { return te::float_imm(v, kF64); }

// One integer scalar value input (dft_length, axis, frame_step, frame_length).
int64_t scalar_value_input(const ir::Node& n, size_t i, const char* what) {
    check_dtype(n, what, input_type(n, i, what).dtype, {DType::kInt32, DType::kInt64});
    const std::vector<int64_t> v = constant_ints(n, i, what);
    KILN_CHECK(v.size() == 1, kInvalidModel)
        << node_label(n) << ": input " << what << " must hold one element, got " << v.size();
    return v[0];
}

// The signal's last dimension: 1 (real) or 2 (complex).
int64_t complex_dim(const ir::Node& n, const ir::TensorType& x, const char* what) {
    const int64_t last = static_dim(n, x.shape.back(), what);
    KILN_CHECK(last == 1 || last == 2, kInvalidModel)
        << node_label(n) << ": the last dimension of " << what << " must be 1 (real) or 2 (complex), got " << last;
    return last;
}

// e^{-/+ i theta} times (xr + i xi): the real (part 0) or imaginary (part 1) component.
// xi may be null (a real signal).
Expr rotate(const Expr& xr, const Expr& xi, const Expr& theta, bool inverse, const Expr& part) {
    const Expr c = te::unary(te::UnaryOp::kCos, theta), s = te::unary(te::UnaryOp::kSin, theta);
    const double sg = inverse ? 1.0 : -1.0;  // sign of the exponent
    Expr re = xr * c, im = c64(sg) * xr * s;
    if (xi) {
        re = re - c64(sg) * xi * s;
        im = im + xi * c;
    }
    return te::select(te::eq(part, te::int_imm(0)), re, im);
}

// theta = 2 pi ((k n) mod L) / L in f64.
Expr angle(const Expr& k, const Expr& n, int64_t len) {
    const Expr m = te::floormod(k * n, te::int_imm(len));
    return te::cast(kF64, m) * c64(2.0 * kPi / static_cast<double>(len));
}

// ---- DFT ----

struct DftGeometry {
    int axis = 0;
    int64_t n = 0;       // signal length along axis
    int64_t len = 0;     // transform length L
    int64_t out_len = 0;  // L or L/2 + 1
};

DftGeometry dft_geometry(const ir::Node& n) {
    const auto& x = input_type(n, 0, "input");
    const int rank = x.rank();
    KILN_CHECK(rank >= 2, kInvalidModel) << node_label(n) << ": input must have rank >= 2, got " << rank;
    int64_t axis = 0;
    if (has_input(n, 2)) {
        axis = scalar_value_input(n, 2, "axis");
    } else {
        axis = -2;  // DFT-20's default (the importer turns DFT-17's attribute into input 2)
    }
    KILN_CHECK(axis >= -rank && axis <= rank - 2 && axis != -1, kInvalidModel)
        << node_label(n) << ": axis must be in [" << -rank << ", -2] or [0, " << rank - 2 << "], got " << axis;
    DftGeometry g;
    g.axis = static_cast<int>(axis < 0 ? axis + rank : axis);
    g.n = static_dim(n, x.shape[g.axis], "input");
    g.len = g.n;
    if (has_input(n, 1)) g.len = scalar_value_input(n, 1, "dft_length");
    KILN_CHECK(g.len >= 1, kInvalidModel) << node_label(n) << ": dft_length must be >= 1, got " << g.len;
    g.out_len = n.attr_int("onesided", 0) != 0 ? g.len / 2 + 1 : g.len;
    return g;
}

OpDef dft_op() {
    OpDef d;
    d.name = "DFT";
    d.onnx_versions = {17, 20};
    d.min_inputs = 1;
    d.max_inputs = 3;
    d.attrs = {{"inverse", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"onesided", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.value_inputs = {1, 2};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, float_types());
        const DftGeometry g = dft_geometry(n);
        complex_dim(n, x, "input");
        std::vector<ir::Dim> out = x.shape;
        out[g.axis] = ir::Dim(g.out_len);
        out.back() = ir::Dim(2);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& x = a.in(0);
        const DftGeometry g = dft_geometry(a.node);
        const bool inverse = a.node.attr_int("inverse", 0) != 0;
        const bool is_complex = x->shape.back() == 2;
        const int last = x->ndim() - 1;
        const int64_t taps = std::min(g.n, g.len);  // zero padding beyond n adds nothing
        te::IterVar r = te::reduce_axis(taps, "n");
        auto acc = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                std::vector<Expr> idx(o.begin(), o.end());
                idx[g.axis] = r->var;
                idx[last] = te::int_imm(0);
                const Expr xr = te::cast(kF64, te::read(x, idx));
                Expr xi;
                if (is_complex) {
                    idx[last] = te::int_imm(1);
                    xi = te::cast(kF64, te::read(x, idx));
                }
                return te::sum(rotate(xr, xi, angle(o[g.axis], r->var, g.len), inverse, o[last]), {r});
            },
            "DFT_acc", kF64);
        const double scale = inverse ? 1.0 / static_cast<double>(g.len) : 1.0;
        auto y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) { return te::read(acc, o) * c64(scale); }, "DFT",
            a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.flops = [](const ir::Node& n) {
        const DftGeometry g = dft_geometry(n);
        return 8.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) *
               static_cast<double>(std::min(g.n, g.len));
    };
    return d;
}

// ---- STFT ----

struct StftGeometry {
    int64_t n = 0, step = 0, len = 0, frames = 0, bins = 0;
};

StftGeometry stft_geometry(const ir::Node& n) {
    const auto& x = input_type(n, 0, "signal");
    KILN_CHECK(x.rank() == 3, kInvalidModel)
        << node_label(n) << ": signal must have rank 3 [batch, length, 1|2], got rank " << x.rank();
    StftGeometry g;
    g.n = static_dim(n, x.shape[1], "signal");
    g.step = scalar_value_input(n, 1, "frame_step");
    KILN_CHECK(g.step >= 1, kInvalidModel) << node_label(n) << ": frame_step must be >= 1, got " << g.step;
    int64_t window_len = -1;
    if (has_input(n, 2)) {
        const auto& w = input_type(n, 2, "window");
        KILN_CHECK(w.rank() == 1, kInvalidModel) << node_label(n) << ": window must have rank 1, got " << w.rank();
        window_len = static_dim(n, w.shape[0], "window");
    }
    g.len = has_input(n, 3) ? scalar_value_input(n, 3, "frame_length") : window_len >= 0 ? window_len : g.n;
    KILN_CHECK(window_len < 0 || window_len == g.len, kInvalidModel)
        << node_label(n) << ": window length must equal frame_length " << g.len << ", got " << window_len;
    KILN_CHECK(g.len >= 1 && g.len <= g.n, kInvalidModel)
        << node_label(n) << ": frame_length must be in [1, " << g.n << "] (the signal length), got " << g.len;
    g.frames = 1 + (g.n - g.len) / g.step;
    g.bins = n.attr_int("onesided", 1) != 0 ? g.len / 2 + 1 : g.len;
    return g;
}

OpDef stft_op() {
    OpDef d;
    d.name = "STFT";
    d.onnx_versions = {17};
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.attrs = {{"onesided", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.value_inputs = {1, 3};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "signal");
        check_dtype(n, "signal", x.dtype, float_types());
        const StftGeometry g = stft_geometry(n);
        complex_dim(n, x, "signal");
        if (has_input(n, 2)) check_same_dtype(n, "signal", x.dtype, "window", input_type(n, 2, "window").dtype);
        return std::vector<ir::TensorType>{{x.dtype, {x.shape[0], ir::Dim(g.frames), ir::Dim(g.bins), ir::Dim(2)}}};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor& x = a.in(0);
        const StftGeometry g = stft_geometry(a.node);
        const bool is_complex = x->shape[2] == 2;
        const te::Tensor window = a.has_input(2) ? a.in(2) : nullptr;
        te::IterVar r = te::reduce_axis(g.len, "n");
        auto acc = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                const Expr pos = o[1] * g.step + r->var;
                Expr w = window ? te::cast(kF64, te::read(window, std::vector<Expr>{r->var})) : Expr();
                auto sample = [&](int64_t part) {
                    Expr v = te::cast(kF64, te::read(x, {o[0], pos, te::int_imm(part)}));
                    return w ? v * w : v;
                };
                const Expr xr = sample(0);
                const Expr xi = is_complex ? sample(1) : Expr();
                return te::sum(rotate(xr, xi, angle(o[2], r->var, g.len), false, o[3]), {r});
            },
            "STFT_acc", kF64);
        auto y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) { return te::read(acc, o); }, "STFT", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.flops = [](const ir::Node& n) {
        const StftGeometry g = stft_geometry(n);
        return 8.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * static_cast<double>(g.len);
    };
    return d;
}

}  // namespace

void register_dft_ops(OpRegistry& r) {
    r.add(dft_op());
    r.add(stft_op());
}

}  // namespace kiln::op
