// Op-harness cases: Quantization and dtype-conversion ops. op_harness_test.cc runs them (all_cases()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "op_harness_refs.h"

namespace kiln::op::testing {

void add_quant_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Scale / zero point at an element of x: one element (per tensor), x's index along axis
    // (per axis), or that index / block (blocked).
    auto param_at = [](const Arr& p, std::vector<int64_t> idx, int axis, int64_t block) {
        if (p.numel() == 1) return p.v[0];
        if (block == 0) return p.v[idx[axis]];
        idx[axis] /= block;
        return p.at(idx);
    };
    // QuantizeLinear from the spec: saturate(rint(x / scale) + zp) to [lo, hi], rint half to even
    // (std::nearbyint in the default rounding mode); the division in f32 (f64 for int32 x).
    auto quantize_ref = [param_at](double lo, double hi, bool f64_div) -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const int axis = norm_axis(n.attr_int("axis", 1), x[0].rank());
            const int64_t block = n.attr_int("block_size", 0);
            Arr y(x[0].shape);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto idx = y.unravel(f);
                const double s = param_at(x[1], idx, axis, block);
                const double q = f64_div ? x[0].v[f] / s : static_cast<double>(static_cast<float>(x[0].v[f]) / static_cast<float>(s));
                const double zp = x.size() > 2 && x[2].present ? param_at(x[2], idx, axis, block) : 0.0;
                y.v[f] = std::clamp(std::nearbyint(q) + zp, lo, hi);
            }
            return Refs{y};
        };
    };
    add("quantize_per_tensor_u8", "QuantizeLinear", {in(F32, {3, 7}, -40, 40), in(F32, {}, 0.1, 0.3), in(U8, {}, 60, 200)},
        {}, quantize_ref(0, 255, false));
    add("quantize_per_axis_i8_output_dtype", "QuantizeLinear", {in(F32, {2, 3, 4}, -50, 50), in(F32, {3}, 0.2, 0.5)},
        {{"axis", int64_t{1}}, {"output_dtype", int64_t{3}}}, quantize_ref(-128, 127, false));
    add("quantize_blocked_i16", "QuantizeLinear",
        {in(F32, {3, 5}, -9000, 9000), in(F32, {3, 3}, 0.05, 0.2), in(I16, {3, 3}, -2000, 2000)},
        {{"axis", int64_t{-1}}, {"block_size", int64_t{2}}}, quantize_ref(-32768, 32767, false));
    add("quantize_int32_input_u16", "QuantizeLinear",
        {in(I32, {10}, -100000, 100000), in(F32, {1}, 0.5, 3), in(U16, {1}, 0, 65535)}, {},
        quantize_ref(0, 65535, true));
    // DequantizeLinear from the spec: (x - zp) * scale.
    auto dequantize_ref = [param_at]() -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const int axis = norm_axis(n.attr_int("axis", 1), x[0].rank());
            const int64_t block = n.attr_int("block_size", 0);
            Arr y(x[0].shape);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto idx = y.unravel(f);
                const double zp = x.size() > 2 && x[2].present ? param_at(x[2], idx, axis, block) : 0.0;
                y.v[f] = (x[0].v[f] - zp) * param_at(x[1], idx, axis, block);
            }
            return Refs{y};
        };
    };
    add("dequantize_per_tensor_u8", "DequantizeLinear", {in(U8, {4, 5}, 0, 255), in(F32, {}, 0.01, 0.1), in(U8, {}, 0, 255)},
        {}, dequantize_ref());
    add("dequantize_per_axis_i8_f16", "DequantizeLinear", {in(I8, {2, 4, 3}, -128, 127), in(F16, {4}, 0.01, 0.05)},
        {{"axis", int64_t{-2}}}, dequantize_ref());
    add("dequantize_blocked_i16_output_dtype", "DequantizeLinear",
        {in(I16, {4, 7}, -32768, 32767), in(F32, {2, 7}, 0.001, 0.01), in(I16, {2, 7}, -500, 500)},
        {{"axis", int64_t{0}}, {"block_size", int64_t{3}}, {"output_dtype", int64_t{11}}}, dequantize_ref());
    add("dequantize_int32", "DequantizeLinear", {in(I32, {6}, -2000000000, 2000000000), in(F64, {}, 1e-6, 1e-5)}, {},
        dequantize_ref());
    // DynamicQuantizeLinear from the spec (f32 arithmetic): the range extended to 0,
    // scale = (max - min) / 255, zp = rint(clamp(-min / scale, 0, 255)),
    // y = clamp(rint(x / scale) + zp, 0, 255).
    auto dynamic_quantize_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        float hi = 0, lo = 0;
        for (double v : x[0].v) hi = std::max(hi, static_cast<float>(v)), lo = std::min(lo, static_cast<float>(v));
        const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
        const float zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
        Arr y(out[0]), s(out[1]), z(out[2]);
        for (int64_t f = 0; f < y.numel(); ++f)
            y.v[f] = std::clamp(std::nearbyint(static_cast<float>(x[0].v[f]) / scale) + zp, 0.0f, 255.0f);
        s.v[0] = scale;
        z.v[0] = zp;
        return Refs{y, s, z};
    };
    add("dynamic_quantize_mixed_sign", "DynamicQuantizeLinear", {in(F32, {3, 4}, -3, 5)}, {}, dynamic_quantize_ref, 3);
    add("dynamic_quantize_positive", "DynamicQuantizeLinear", {in(F32, {2, 3, 5}, 0.5, 4)}, {}, dynamic_quantize_ref, 3);
    // (x - zp) for a zero point per tensor or per index `pos` of x (MatMul rows / columns, Conv
    // output channels).
    auto shifted = [](const Arr& x, const Arr* zp, int pos) {
        Arr r = x;
        if (!zp || !zp->present) return r;
        for (int64_t f = 0; f < r.numel(); ++f) {
            const auto idx = r.unravel(f);
            const int p = pos < 0 ? r.rank() + pos : pos;
            r.v[f] -= zp->numel() == 1 ? zp->v[0] : zp->v[idx[p]];
        }
        return r;
    };
    auto matmul_integer_ref = [shifted](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{ref_matmul(shifted(x[0], x.size() > 2 ? &x[2] : nullptr, -2),
                               shifted(x[1], x.size() > 3 ? &x[3] : nullptr, -1), out[0])};
    };
    add("matmul_integer_per_row_col", "MatMulInteger", {in(U8, {3, 4}, 0, 255), in(I8, {4, 5}, -128, 127),
        in(U8, {3}, 0, 255), in(I8, {5}, -128, 127)}, {}, matmul_integer_ref);
    add("matmul_integer_batched_no_zp", "MatMulInteger", {in(I8, {2, 3, 6}, -128, 127), in(U8, {6, 2}, 0, 255)}, {},
        matmul_integer_ref);
    add("matmul_integer_b_zp_only", "MatMulInteger", {in(U8, {4, 3}, 0, 255), in(U8, {2, 3, 5}, 0, 255), omitted(),
        in(U8, {}, 0, 255)}, {}, matmul_integer_ref);
    auto conv_integer_ref = [shifted](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        return Refs{ref_conv(shifted(x[0], x.size() > 2 ? &x[2] : nullptr, 0),
                             shifted(x[1], x.size() > 3 ? &x[3] : nullptr, 0), nullptr, n, out[0])};
    };
    add("conv_integer_pads_strides_per_channel", "ConvInteger", {in(U8, {1, 2, 6, 5}, 0, 255),
        in(I8, {3, 2, 3, 3}, -128, 127), in(U8, {}, 0, 255), in(I8, {3}, -10, 10)},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 1}}}, conv_integer_ref);
    add("conv_integer_group_same_upper", "ConvInteger", {in(I8, {2, 4, 5, 5}, -128, 127),
        in(I8, {4, 2, 2, 2}, -128, 127), in(I8, {}, -128, 127)},
        {{"group", int64_t{2}}, {"auto_pad", std::string("SAME_UPPER")}}, conv_integer_ref);
    // QLinear*: y = saturate(rint(acc * m + y_zp)) with m = a_scale * b_scale / y_scale rounded
    // to the scale type after each operation (f16 via support's half conversions), acc * m in
    // double (numpy's promotion of int32 * float).
    auto round_scale = [](double v, bool half) {
        return half ? static_cast<double>(half_to_float(float_to_half(static_cast<float>(v))))
                    : static_cast<double>(static_cast<float>(v));
    };
    auto requant = [round_scale](double acc, double s1, double s2, double s3, double yzp, bool half, double lo,
                                 double hi) {
        const double m = round_scale(round_scale(s1 * s2, half) / s3, half);
        return std::clamp(std::nearbyint(acc * m + yzp), lo, hi);
    };
    auto qlinear_matmul_ref = [shifted, requant](bool half, double lo, double hi) -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr acc = ref_matmul(shifted(x[0], &x[2], -2), shifted(x[3], &x[5], -1), out[0]);
            for (int64_t f = 0; f < acc.numel(); ++f) {
                const auto idx = acc.unravel(f);
                const int64_t r = idx[idx.size() - 2], c = idx.back();
                const double sa = x[1].numel() == 1 ? x[1].v[0] : x[1].v[r];
                const double sb = x[4].numel() == 1 ? x[4].v[0] : x[4].v[c];
                acc.v[f] = requant(acc.v[f], sa, sb, x[6].v[0], x[7].v[0], half, lo, hi);
            }
            return Refs{acc};
        };
    };
    add("qlinear_matmul_i8_per_column", "QLinearMatMul", {in(I8, {2, 3, 4}, -128, 127), in(F32, {}, 0.01, 0.03),
        in(I8, {}, -20, 20), in(U8, {4, 5}, 0, 255), in(F32, {5}, 0.01, 0.03), in(U8, {5}, 100, 150),
        in(F32, {}, 0.02, 0.05), in(I8, {}, -10, 10)}, {}, qlinear_matmul_ref(false, -128, 127));
    add("qlinear_matmul_u8_f16_scales_per_row", "QLinearMatMul", {in(U8, {3, 6}, 0, 255), in(F16, {3}, 0.01, 0.03),
        in(U8, {3}, 100, 150), in(I8, {6, 2}, -128, 127), in(F16, {1}, 0.01, 0.03), in(I8, {1}, -5, 5),
        in(F16, {1}, 0.05, 0.1), in(U8, {1}, 100, 150)}, {}, qlinear_matmul_ref(true, 0, 255));
    auto qlinear_conv_ref = [shifted, requant](const std::vector<Arr>& x, const ir::Node& n,
                                               const std::vector<Shape>& out) {
        const Arr* bias = x.size() > 8 && x[8].present ? &x[8] : nullptr;
        Arr acc = ref_conv(shifted(x[0], &x[2], 0), shifted(x[3], &x[5], 0), bias, n, out[0]);
        for (int64_t f = 0; f < acc.numel(); ++f) {
            const int64_t m = acc.unravel(f)[1];
            const double sw = x[4].numel() == 1 ? x[4].v[0] : x[4].v[m];
            acc.v[f] = requant(acc.v[f], x[1].v[0], sw, x[6].v[0], x[7].v[0], false, 0, 255);
        }
        return Refs{acc};
    };
    add("qlinear_conv_per_channel_bias", "QLinearConv", {in(U8, {1, 2, 5, 6}, 0, 255), in(F32, {}, 0.01, 0.02),
        in(U8, {}, 100, 150), in(I8, {3, 2, 3, 3}, -20, 20), in(F32, {3}, 0.01, 0.02), in(I8, {3}, -3, 3),
        in(F32, {}, 0.01, 0.02), in(U8, {}, 100, 150), in(I32, {3}, -2000, 2000)},
        {{"pads", Ints{1, 0, 1, 2}}, {"strides", Ints{1, 2}}}, qlinear_conv_ref);
    add("qlinear_conv_no_bias_dilation", "QLinearConv", {in(U8, {2, 1, 7, 7}, 0, 255), in(F32, {1}, 0.01, 0.02),
        in(U8, {1}, 100, 150), in(U8, {2, 1, 2, 2}, 0, 255), in(F32, {}, 0.01, 0.02), in(U8, {}, 100, 150),
        in(F32, {}, 0.05, 0.1), in(U8, {}, 100, 150)}, {{"dilations", Ints{2, 2}}}, qlinear_conv_ref);
    // END add_quant_cases
}

// Harness cases of the dtype op family (kept in their own block so families grow independently).

void add_dtype_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Cast to the low-precision types. Reference: round |x| to nearest even on the format's grid
    // (quantum 2^(max(floor(log2|x|), 1 - bias) - mantissa bits), std::nearbyint), then the
    // saturate=1 clamp to +-max; i4/u4 truncate and wrap (checked after wrapping).
    auto grid = [](int m_bits, int bias, double max) {
        return [=](double x) {
            if (x == 0) return x;
            const int e = std::max(static_cast<int>(std::floor(std::log2(std::fabs(x)))), 1 - bias);
            const double q = std::ldexp(1.0, e - m_bits);
            return std::clamp(std::nearbyint(x / q) * q, -max, max);
        };
    };
    auto lowp_cast = [&](const char* name, In x, int onnx_to, std::function<double(double)> f) {
        add(name, "Cast", {std::move(x)}, {{"to", int64_t{onnx_to}}}, unary_ref(std::move(f)));
    };
    lowp_cast("cast_f32_to_f8e4m3fn_saturate", in(F32, {4, 8}, -600, 600), 17, grid(3, 7, 448));
    lowp_cast("cast_f32_to_f8e4m3fnuz_small", in(F32, {37}, -0.05, 0.05), 18, grid(3, 8, 240));
    lowp_cast("cast_f16_to_f8e5m2_saturate", in(F16, {4, 8}, -65000, 65000), 19, grid(2, 15, 57344));
    lowp_cast("cast_f32_to_f8e5m2fnuz", in(F32, {33}, -3, 3), 20, grid(2, 16, 57344));
    lowp_cast("cast_f32_to_f4e2m1_saturate", in(F32, {25}, -9, 9), 23, grid(1, 1, 6));
    lowp_cast("cast_f32_to_i4_wraps", in(F32, {25}, -20, 20), 22, [](double x) { return std::trunc(x); });
    lowp_cast("cast_i32_to_u4_wraps", in(I32, {25}, -40, 40), 21, [](double x) { return x; });
    lowp_cast("cast_f8e4m3fn_to_f32_exact", in(DType::kFloat8E4M3FN, {16}, -400, 400), 1, [](double x) { return x; });
    lowp_cast("cast_i4_to_f16_exact", in(DType::kInt4, {16}, -8, 7), 10, [](double x) { return x; });
    // END add_dtype_cases
}

// Harness cases of the signal op family (kept in their own block so families grow independently).

}  // namespace kiln::op::testing
