// Op-harness cases: Elementwise math and logic ops. op_harness_test.cc runs them (all_cases()).
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

void add_math_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Unary math (ONNX spec formulas, written out here in double).
    const AttrMap none;
    auto u = [&](const char* name, const char* op, In x, std::function<double(double)> f, AttrMap a = {}) {
        add(name, op, {std::move(x)}, std::move(a), unary_ref(std::move(f)));
    };
    auto splus = [](double x) { return std::log(1 + std::exp(x)); };
    u("reciprocal_f32", "Reciprocal", in(F32, {3, 4}, 0.5, 3), [](double x) { return 1 / x; });
    u("reciprocal_f64", "Reciprocal", in(F64, {5}, -3, -0.5), [](double x) { return 1 / x; });
    u("floor_f32", "Floor", in(F32, {2, 7}, -5, 5), [](double x) { return std::floor(x); });
    u("ceil_f64", "Ceil", in(F64, {9}, -5, 5), [](double x) { return std::ceil(x); });
    u("round_f32", "Round", in(F32, {4, 6}, -6, 6), [](double x) { return std::nearbyint(x); });
    u("round_f16", "Round", in(F16, {11}, -6, 6), [](double x) { return std::nearbyint(x); });
    auto sgn = [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; };
    u("sign_f32", "Sign", in(F32, {13}, -3, 3), sgn);
    u("sign_i32", "Sign", in(I32, {3, 5}, -3, 3), sgn);
    u("sign_u8", "Sign", in(U8, {7}, 0, 3), sgn);
    u("sin_f64", "Sin", in(F64, {6}, -4, 4), [](double x) { return std::sin(x); });
    u("cos_f32", "Cos", in(F32, {2, 6}, -4, 4), [](double x) { return std::cos(x); });
    u("tan_f32", "Tan", in(F32, {10}, -1.2, 1.2), [](double x) { return std::tan(x); });
    u("asin_f32", "Asin", in(F32, {10}, -0.95, 0.95), [](double x) { return std::asin(x); });
    u("acos_f64", "Acos", in(F64, {10}, -0.95, 0.95), [](double x) { return std::acos(x); });
    u("atan_f16", "Atan", in(F16, {10}, -4, 4), [](double x) { return std::atan(x); });
    u("sinh_f32", "Sinh", in(F32, {8}, -3, 3), [](double x) { return std::sinh(x); });
    u("cosh_bf16", "Cosh", in(BF16, {8}, -3, 3), [](double x) { return std::cosh(x); });
    u("asinh_f32", "Asinh", in(F32, {8}, -5, 5), [](double x) { return std::asinh(x); });
    u("acosh_f32", "Acosh", in(F32, {8}, 1.01, 6), [](double x) { return std::acosh(x); });
    u("atanh_f64", "Atanh", in(F64, {8}, -0.95, 0.95), [](double x) { return std::atanh(x); });
    u("softplus_f32", "Softplus", in(F32, {3, 9}, -15, 15), splus);
    u("softsign_f32", "Softsign", in(F32, {12}, -5, 5), [](double x) { return x / (1 + std::fabs(x)); });
    u("elu_alpha", "Elu", in(F32, {3, 5}, -3, 3), [](double x) { return x < 0 ? 2.0 * (std::exp(x) - 1) : x; },
      {{"alpha", 2.0}});
    u("elu_default_f64", "Elu", in(F64, {9}, -3, 3), [](double x) { return x < 0 ? std::exp(x) - 1 : x; });
    const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
    u("selu_default", "Selu", in(F32, {10}, -3, 3),
      [=](double x) { return x > 0 ? sg * x : sg * (sa * std::exp(x) - sa); });
    u("selu_attrs", "Selu", in(F32, {10}, -3, 3), [](double x) { return x > 0 ? 3 * x : 3 * (2 * std::exp(x) - 2); },
      {{"alpha", 2.0}, {"gamma", 3.0}});
    u("celu_alpha", "Celu", in(F32, {12}, -4, 4),
      [](double x) { return std::max(0.0, x) + std::min(0.0, 2.0 * (std::exp(x / 2.0) - 1)); }, {{"alpha", 2.0}});
    u("leakyrelu_default", "LeakyRelu", in(F32, {12}), [](double x) { return x < 0 ? 0.01 * x : x; });
    u("leakyrelu_f16", "LeakyRelu", in(F16, {12}), [](double x) { return x < 0 ? 0.5 * x : x; }, {{"alpha", 0.5}});
    u("thresholdedrelu", "ThresholdedRelu", in(F32, {12}), [](double x) { return x > 0.5 ? x : 0; },
      {{"alpha", 0.5}});
    u("hardsigmoid_attrs", "HardSigmoid", in(F32, {12}, -6, 6),
      [](double x) { return std::max(0.0, std::min(1.0, 0.25 * x + 0.4)); }, {{"alpha", 0.25}, {"beta", 0.4}});
    u("hardswish", "HardSwish", in(F32, {14}, -5, 5),
      [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); });
    u("mish_f32", "Mish", in(F32, {3, 8}, -8, 8), [=](double x) { return x * std::tanh(splus(x)); });
    auto prelu = [](double x, double s) { return x < 0 ? s * x : x; };
    add("prelu_bcast", "PRelu", {in(F32, {2, 3, 4}), in(F32, {3, 1})}, none, binary_ref(prelu));
    add("prelu_i64_scalar_slope", "PRelu", {in(I64, {6}, -9, 9), in(I64, {1}, 1, 3)}, none, binary_ref(prelu));
    u("isnan_f32", "IsNaN", in(F32, {7}), [](double x) { return std::isnan(x) ? 1.0 : 0.0; });
    u("isinf_f64", "IsInf", in(F64, {7}), [](double x) { return std::isinf(x) ? 1.0 : 0.0; });
    u("isinf_neg_only", "IsInf", in(F32, {7}), [](double x) { return x == -INFINITY ? 1.0 : 0.0; },
      {{"detect_positive", int64_t{0}}});
    u("not_bool", "Not", in(DType::kBool, {3, 4}, 0, 1), [](double x) { return x == 0 ? 1.0 : 0.0; });
    // Cast / CastLike (float -> int truncates; -> bool is != 0).
    auto code = [](DType t) -> int64_t {  // TensorProto.DataType
        switch (t) {
            case DType::kFloat32: return 1;
            case DType::kUInt8: return 2;
            case DType::kInt8: return 3;
            case DType::kUInt16: return 4;
            case DType::kInt16: return 5;
            case DType::kInt32: return 6;
            case DType::kInt64: return 7;
            case DType::kBool: return 9;
            case DType::kFloat16: return 10;
            case DType::kFloat64: return 11;
            case DType::kUInt32: return 12;
            case DType::kUInt64: return 13;
            case DType::kBFloat16: return 16;
        }
        return 0;
    };
    auto cast_case = [&](const char* name, In x, DType to, std::function<double(double)> f) {
        add(name, "Cast", {std::move(x)}, {{"to", code(to)}}, unary_ref(std::move(f)));
    };
    auto same = [](double x) { return x; };
    cast_case("cast_f32_to_i32", in(F32, {3, 5}, -100, 100), I32, [](double x) { return std::trunc(x); });
    cast_case("cast_f64_to_f16", in(F64, {9}), F16, same);
    cast_case("cast_f32_to_bf16", in(F32, {9}), BF16, same);
    cast_case("cast_f16_to_f64", in(F16, {9}), F64, same);
    cast_case("cast_i64_to_f32", in(I64, {9}, -1000, 1000), F32, same);
    cast_case("cast_i32_to_u8", in(I32, {9}, -300, 300), U8, same);  // wraps (checked after wrapping)
    cast_case("cast_f32_to_bool", in(F32, {9}, -1, 1), DType::kBool, [](double x) { return x != 0 ? 1.0 : 0.0; });
    cast_case("cast_bool_to_f32", in(DType::kBool, {9}, 0, 1), F32, same);
    cast_case("cast_u16_to_i8", in(U16, {9}, 0, 60000), I8, same);
    add("castlike_f32_to_i64", "CastLike", {in(F32, {2, 4}, -50, 50), in(I64, {1}, 0, 1)}, none,
        unary_ref([](double x) { return std::trunc(x); }));
    add("castlike_i8_to_f16", "CastLike", {in(I8, {5}, -100, 100), in(F16, {}, 0, 1)}, none, unary_ref(same));
    // Variadic Max / Min / Sum / Mean with multidirectional broadcasting.
    auto nary = [](std::function<double(const std::vector<double>&)> f) -> RefFn {
        return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            for (int64_t i = 0; i < r.numel(); ++i) {
                auto idx = r.unravel(i);
                std::vector<double> vals;
                for (const Arr& a : x) vals.push_back(a.bread(idx));
                r.v[i] = f(vals);
            }
            return Refs{r};
        };
    };
    auto vmax = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    auto vmin = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto vsum = [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s; };
    auto vmean = [=](const std::vector<double>& v) { return vsum(v) / v.size(); };
    add("max_three_bcast", "Max", {in(F32, {2, 1, 4}), in(F32, {3, 1}), in(F32, {4})}, none, nary(vmax));
    add("max_one_input_i8", "Max", {in(I8, {5}, -100, 100)}, none, nary(vmax));
    add("max_u64", "Max", {in(U64, {6}, 0, 1000), in(U64, {6}, 0, 1000)}, none, nary(vmax));
    add("min_two_i32", "Min", {in(I32, {3, 4}, -50, 50), in(I32, {4}, -50, 50)}, none, nary(vmin));
    add("min_f16", "Min", {in(F16, {6}), in(F16, {6}), in(F16, {1})}, none, nary(vmin));
    add("sum_four_bcast", "Sum", {in(F32, {2, 3}), in(F32, {3}), in(F32, {2, 1}), in(F32, {})}, none, nary(vsum));
    add("sum_one_f64", "Sum", {in(F64, {4})}, none, nary(vsum));
    add("mean_three_f32", "Mean", {in(F32, {3, 4}), in(F32, {4}), in(F32, {3, 1})}, none, nary(vmean));
    add("mean_bf16", "Mean", {in(BF16, {6}), in(BF16, {6})}, none, nary(vmean));
    (void)add;
    // END add_math_cases
}

// Harness cases of the logic op family (kept in their own block so families grow independently).

void add_logic_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Comparisons (bool results), logic, bitwise, BitShift, Mod, Where.
    const AttrMap none;
    const DType B = DType::kBool;
    auto cmp = [](std::function<bool(double, double)> f) {
        return binary_ref([f](double a, double b) { return f(a, b) ? 1.0 : 0.0; });
    };
    add("equal_i32_bcast", "Equal", {in(I32, {3, 4}, -2, 2), in(I32, {4}, -2, 2)}, none,
        cmp([](double a, double b) { return a == b; }));
    add("equal_bool", "Equal", {in(B, {6}, 0, 1), in(B, {6}, 0, 1)}, none, cmp([](double a, double b) { return a == b; }));
    add("equal_u16", "Equal", {in(U16, {8}, 0, 3), in(U16, {}, 0, 3)}, none, cmp([](double a, double b) { return a == b; }));
    add("less_f32_bcast", "Less", {in(F32, {2, 3, 4}), in(F32, {3, 1})}, none, cmp([](double a, double b) { return a < b; }));
    add("less_u8", "Less", {in(U8, {9}, 0, 255), in(U8, {9}, 0, 255)}, none, cmp([](double a, double b) { return a < b; }));
    add("greater_f16", "Greater", {in(F16, {7}), in(F16, {7})}, none, cmp([](double a, double b) { return a > b; }));
    add("greater_u64", "Greater", {in(U64, {7}, 0, 9), in(U64, {7}, 0, 9)}, none,
        cmp([](double a, double b) { return a > b; }));
    add("less_or_equal_i64", "LessOrEqual", {in(I64, {3, 3}, -2, 2), in(I64, {3, 1}, -2, 2)}, none,
        cmp([](double a, double b) { return a <= b; }));
    add("greater_or_equal_i8", "GreaterOrEqual", {in(I8, {9}, -2, 2), in(I8, {9}, -2, 2)}, none,
        cmp([](double a, double b) { return a >= b; }));
    add("greater_or_equal_f64", "GreaterOrEqual", {in(F64, {2, 5}), in(F64, {5})}, none,
        cmp([](double a, double b) { return a >= b; }));
    add("and_bcast", "And", {in(B, {2, 3, 4}, 0, 1), in(B, {4}, 0, 1)}, none,
        cmp([](double a, double b) { return a != 0 && b != 0; }));
    add("or_bcast", "Or", {in(B, {3, 4}, 0, 1), in(B, {3, 1}, 0, 1)}, none,
        cmp([](double a, double b) { return a != 0 || b != 0; }));
    add("xor_2d", "Xor", {in(B, {3, 4}, 0, 1), in(B, {3, 4}, 0, 1)}, none,
        cmp([](double a, double b) { return (a != 0) != (b != 0); }));
    // Bitwise: on the two's-complement bit patterns (naive, via uint64).
    auto bits = [](std::function<uint64_t(uint64_t, uint64_t)> f) {
        return binary_ref([f](double a, double b) {
            return static_cast<double>(static_cast<int64_t>(
                f(static_cast<uint64_t>(static_cast<int64_t>(a)), static_cast<uint64_t>(static_cast<int64_t>(b)))));
        });
    };
    add("bitwise_and_i16", "BitwiseAnd", {in(I16, {3, 4}, -3000, 3000), in(I16, {4}, -3000, 3000)}, none,
        bits([](uint64_t a, uint64_t b) { return a & b; }));
    add("bitwise_or_u64", "BitwiseOr", {in(U64, {6}, 0, 1 << 30), in(U64, {1}, 0, 1 << 30)}, none,
        bits([](uint64_t a, uint64_t b) { return a | b; }));
    add("bitwise_xor_i32", "BitwiseXor", {in(I32, {2, 5}, -1000000, 1000000), in(I32, {2, 5}, -1000000, 1000000)}, none,
        bits([](uint64_t a, uint64_t b) { return a ^ b; }));
    add("bitwise_not_i32", "BitwiseNot", {in(I32, {3, 3}, -1000, 1000)}, none, unary_ref([](double x) { return -x - 1; }));
    add("bitwise_not_u8", "BitwiseNot", {in(U8, {8}, 0, 255)}, none, unary_ref([](double x) { return 255 - x; }));
    add("bitshift_left_u8", "BitShift", {in(U8, {8}, 0, 255), in(U8, {8}, 0, 7)}, {{"direction", std::string("LEFT")}},
        binary_ref([](double a, double b) { return std::fmod(a * std::ldexp(1.0, static_cast<int>(b)), 256.0); }));
    add("bitshift_right_u32_bcast", "BitShift", {in(U32, {2, 4}, 0, 4000000000.0), in(U32, {4}, 0, 31)},
        {{"direction", std::string("RIGHT")}},
        binary_ref([](double a, double b) { return std::floor(a / std::ldexp(1.0, static_cast<int>(b))); }));
    add("bitshift_left_u64", "BitShift", {in(U64, {5}, 0, 1000), in(U64, {5}, 0, 40)}, {{"direction", std::string("LEFT")}},
        binary_ref([](double a, double b) { return a * std::ldexp(1.0, static_cast<int>(b)); }));
    // Mod: fmod=0 takes the divisor's sign (Python), fmod=1 the dividend's (C fmod).
    auto pymod = [](double a, double b) { return a - std::floor(a / b) * b; };
    add("mod_i32_pos_divisor", "Mod", {in(I32, {3, 5}, -20, 20), in(I32, {5}, 1, 7)}, none, binary_ref(pymod));
    add("mod_i64_neg_divisor", "Mod", {in(I64, {9}, -20, 20), in(I64, {9}, -7, -1)}, none, binary_ref(pymod));
    add("mod_i8_fmod", "Mod", {in(I8, {9}, -100, 100), in(I8, {9}, -9, -1)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    add("mod_u16", "Mod", {in(U16, {9}, 0, 60000), in(U16, {}, 1, 300)}, none, binary_ref(pymod));
    add("mod_f32_fmod", "Mod", {in(F32, {2, 6}, -10, 10), in(F32, {6}, 0.5, 3)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    add("mod_f16_fmod", "Mod", {in(F16, {8}, -10, 10), in(F16, {8}, -3, -0.5)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    auto where = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r(out[0]);
        for (int64_t i = 0; i < r.numel(); ++i) {
            auto idx = r.unravel(i);
            r.v[i] = x[0].bread(idx) != 0 ? x[1].bread(idx) : x[2].bread(idx);
        }
        return Refs{r};
    };
    add("where_3way_bcast", "Where", {in(B, {2, 1, 4}, 0, 1), in(F32, {3, 1}), in(F32, {4})}, none, where);
    add("where_i64", "Where", {in(B, {5}, 0, 1), in(I64, {5}, -9, 9), in(I64, {}, -9, 9)}, none, where);
    add("where_bool_values", "Where", {in(B, {2, 3}, 0, 1), in(B, {2, 3}, 0, 1), in(B, {3}, 0, 1)}, none, where);
    (void)add;
    // END add_logic_cases
}

// Harness cases of the shape op family (kept in their own block so families grow independently).

}  // namespace kiln::op::testing
