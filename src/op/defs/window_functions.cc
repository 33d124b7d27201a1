// Signal generator ops (opset 17): outputs made from constant scalar inputs only.
//  - HannWindow / HammingWindow / BlackmanWindow: `size` is a constant scalar (value input, it
//    fixes the length N). With M = periodic ? N : N - 1 and t = 2 pi n / M:
//      Hann     w[n] = 0.5 - 0.5 cos(t)                       (= sin^2(pi n / M))
//      Hamming  w[n] = a - (1 - a) cos(t),  a = 25 / 46
//      Blackman w[n] = 0.42 - 0.5 cos(t) + 0.08 cos(2 t)
//    Computed in f64, stored in `output_datatype` (default f32).
//  - MelWeightMatrix: every input is a constant scalar. The triangle corners are integer
//    spectrogram bins fixed at compile time (the spec's formula: mel points spaced evenly between
//    the edge frequencies, mapped back to hertz and to bins floor((dft_length + 1) f / rate));
//    column i rises linearly from bin lo_i to c_i and falls to 0 at hi_i. The per-column corners
//    enter the compute as small select tables (O(num_mel_bins) per element).
#include <cmath>
#include <string>

#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr double kPi = 3.14159265358979323846;

// The `output_datatype` attribute as a DType (numeric only).
DType output_datatype(const ir::Node& n) {
    const int64_t code = n.attr_int("output_datatype", 1);
    std::optional<DType> t = dtype_from_onnx(static_cast<int>(code));
    KILN_CHECK(t.has_value(), kUnsupported) << node_label(n) << ": unsupported output_datatype code " << code;
    check_dtype(n, "output", *t, numeric_types());
    return *t;
}

int64_t scalar_int(const ir::Node& n, size_t i, const char* what) {
    const Tensor& t = constant_scalar(n, i, what);
    KILN_CHECK(dtype_is_int(t.dtype()), kInvalidModel)
        << node_label(n) << ": input " << what << " must be an integer, got " << dtype_name(t.dtype());
    return t.get_i64(0);
}

enum class WindowKind { kHann, kHamming, kBlackman };

OpDef window_op(const std::string& name, WindowKind kind) {
    OpDef d;
    d.name = name;
    d.onnx_versions = {17};
    d.attrs = {{"periodic", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"output_datatype", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.value_inputs = {0};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const int64_t size = scalar_int(n, 0, "size");
        KILN_CHECK(size >= 0, kInvalidModel) << node_label(n) << ": size must be >= 0, got " << size;
        return std::vector<ir::TensorType>{{output_datatype(n), {size}}};
    };
    d.compute = [kind](const ComputeArgs& a) {
        const int64_t size = a.out_shape()[0];
        const bool periodic = a.node.attr_int("periodic", 1) != 0;
        const double m = static_cast<double>(periodic ? size : size - 1);
        // M = 0 (a symmetric window of length 1): numpy's 0/0 gives NaN; keep the spec's formula.
        auto f64 = [](double v) { return te::make_const(DType::kFloat64, v); };
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr t = te::cast(DType::kFloat64, i[0]) * f64(2 * kPi) / f64(m);
                Expr c1 = te::unary(te::UnaryOp::kCos, t);
                switch (kind) {
                    case WindowKind::kHann: return f64(0.5) - f64(0.5) * c1;
                    case WindowKind::kHamming: return f64(25.0 / 46.0) - f64(1.0 - 25.0 / 46.0) * c1;
                    case WindowKind::kBlackman:
                        return f64(0.42) - f64(0.5) * c1 + f64(0.08) * te::unary(te::UnaryOp::kCos, t * f64(2.0));
                }
                return c1;
            },
            a.node.op(), a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Triangle corners of the mel filters: bins[k] for k in [0, num_mel_bins + 2).
struct MelGeometry {
    int64_t num_mel_bins = 0, spectrogram_bins = 0;
    std::vector<int64_t> bins;
};

MelGeometry mel_geometry(const ir::Node& n) {
    MelGeometry g;
    g.num_mel_bins = scalar_int(n, 0, "num_mel_bins");
    const int64_t dft_length = scalar_int(n, 1, "dft_length");
    const int64_t rate = scalar_int(n, 2, "sample_rate");
    const double lower = constant_scalar(n, 3, "lower_edge_hertz").get_f64(0);
    const double upper = constant_scalar(n, 4, "upper_edge_hertz").get_f64(0);
    KILN_CHECK(g.num_mel_bins > 0 && dft_length > 0 && rate > 0, kInvalidModel)
        << node_label(n) << ": num_mel_bins, dft_length and sample_rate must be > 0, got " << g.num_mel_bins << ", "
        << dft_length << ", " << rate;
    KILN_CHECK(lower >= 0 && lower <= upper, kInvalidModel)
        << node_label(n) << ": expected 0 <= lower_edge_hertz <= upper_edge_hertz, got " << lower << " and " << upper;
    g.spectrogram_bins = dft_length / 2 + 1;
    // The reference computes the mel edges in the edge inputs' precision (f32 in the suite).
    auto mel = [](double hz) { return 2595.0f * std::log10(1.0f + static_cast<float>(hz) / 700.0f); };
    const float low = mel(lower), high = mel(upper);
    const float step = (high - low) / static_cast<float>(g.num_mel_bins + 2);
    for (int64_t k = 0; k < g.num_mel_bins + 2; ++k) {
        double m = static_cast<double>(k) * static_cast<double>(step) + static_cast<double>(low);
        double hz = 700.0 * (std::pow(10.0, m / 2595.0) - 1.0);
        int64_t bin = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
        KILN_CHECK(bin >= 0 && (k == g.num_mel_bins + 1 || bin < g.spectrogram_bins), kUnsupported)
            << node_label(n) << ": mel filter corner bin " << bin << " lies outside [0, " << g.spectrogram_bins
            << ") (upper_edge_hertz above the Nyquist frequency)";
        g.bins.push_back(bin);
    }
    return g;
}

OpDef mel_weight_matrix_op() {
    OpDef d;
    d.name = "MelWeightMatrix";
    d.onnx_versions = {17};
    d.min_inputs = d.max_inputs = 5;
    d.attrs = {{"output_datatype", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.value_inputs = {0, 1, 2, 3, 4};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        MelGeometry g = mel_geometry(n);
        return std::vector<ir::TensorType>{{output_datatype(n), {g.spectrogram_bins, g.num_mel_bins}}};
    };
    d.compute = [](const ComputeArgs& a) {
        MelGeometry g = mel_geometry(a.node);
        std::vector<int64_t> lo(g.bins.begin(), g.bins.end() - 2), mid(g.bins.begin() + 1, g.bins.end() - 1),
            hi(g.bins.begin() + 2, g.bins.end());
        auto f64 = [](const Expr& e) { return te::cast(DType::kFloat64, e); };
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr j = i[0];
                Expr l = const_table(i[1], lo), c = const_table(i[1], mid), h = const_table(i[1], hi);
                Expr one = te::make_const(DType::kFloat64, 1.0), zero = te::make_const(DType::kFloat64, 0.0);
                Expr rise = te::select(te::eq(c, l), one, f64(j - l) / f64(te::max(c - l, te::int_imm(1))));
                Expr fall = f64(h - j) / f64(te::max(h - c, te::int_imm(1)));
                return te::select(te::logical_and(j >= c, j < h), fall,
                                  te::select(te::logical_and(j >= l, j <= c), rise, zero));
            },
            "MelWeightMatrix", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_window_ops(OpRegistry& r) {
    r.add(window_op("HannWindow", WindowKind::kHann));
    r.add(window_op("HammingWindow", WindowKind::kHamming));
    r.add(window_op("BlackmanWindow", WindowKind::kBlackman));
    r.add(mel_weight_matrix_op());
}

}  // namespace kiln::op
