// The low-precision float conversions (support/lowp_float.cc) against an independent reference
// written here: decoding by the format's formula with std::ldexp, encoding by brute force (the
// nearest of all finite codes, ties to the even code, overflow decided by the midpoint between
// max and the next value the format would have), with the ONNX Cast-19 saturate tables.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support/dtype.h"
#include "support/tensor.h"

namespace kiln {
namespace {

struct Spec {
    DType t;
    int e_bits, m_bits, bias;
    bool fnuz, ieee, fn, no_special;
    double max;
};
const Spec kSpecs[] = {
    {DType::kFloat8E4M3FN, 4, 3, 7, false, false, true, false, 448.0},
    {DType::kFloat8E4M3FNUZ, 4, 3, 8, true, false, false, false, 240.0},
    {DType::kFloat8E5M2, 5, 2, 15, false, true, false, false, 57344.0},
    {DType::kFloat8E5M2FNUZ, 5, 2, 16, true, false, false, false, 57344.0},
    {DType::kFloat4E2M1, 2, 1, 1, false, false, false, true, 6.0},
};

int ncodes(const Spec& s) { return 1 << (1 + s.e_bits + s.m_bits); }

// NaN is returned as NaN, inf as inf.
double ref_decode(const Spec& s, int code) {
    const int width = s.e_bits + s.m_bits;
    const bool neg = (code >> width) & 1;
    const int e = (code >> s.m_bits) & ((1 << s.e_bits) - 1), m = code & ((1 << s.m_bits) - 1);
    const int e_all = (1 << s.e_bits) - 1, m_all = (1 << s.m_bits) - 1;
    if (s.fnuz && code == (1 << width)) return NAN;
    if (s.fn && e == e_all && m == m_all) return NAN;
    if (s.ieee && e == e_all) return m ? NAN : (neg ? -INFINITY : INFINITY);
    double mag = e == 0 ? std::ldexp(m, 1 - s.bias - s.m_bits)
                        : std::ldexp(1.0 + std::ldexp(m, -s.m_bits), e - s.bias);
    return neg ? -mag : mag;
}

int sign_code(const Spec& s, bool neg) { return neg ? 1 << (s.e_bits + s.m_bits) : 0; }

int ref_encode(const Spec& s, float xf, bool saturate) {
    const double x = xf;
    const bool neg = std::signbit(xf);
    if (s.no_special) saturate = true;
    if (std::isnan(x)) {
        if (s.no_special) return sign_code(s, !neg);  // ml_dtypes (the ONNX reference data)
        if (s.fnuz) return 0x80;
        if (s.ieee) return sign_code(s, neg) | 0x7e;
        return sign_code(s, neg) | 0x7f;
    }
    // Overflow threshold: the midpoint between max and max + ulp(max); the tie goes to max when
    // max's code is even.
    const int max_exp = static_cast<int>(std::floor(std::log2(s.max)));
    const double ulp = std::ldexp(1.0, max_exp - s.m_bits), mid = s.max + ulp / 2;
    const bool max_even = ((static_cast<int>(s.max / ulp)) & 1) == 0;
    const double a = std::fabs(x);
    if (a > mid || (a == mid && !max_even)) {
        if (saturate) {
            for (int c = 0; c < ncodes(s) / 2; ++c)
                if (ref_decode(s, c) == s.max) return sign_code(s, neg) | c;
        }
        if (s.ieee) return sign_code(s, neg) | 0x7c;
        if (s.fnuz) return 0x80;
        return sign_code(s, neg) | 0x7f;
    }
    int best = -1;
    double best_d = 0;
    for (int c = 0; c < ncodes(s) / 2; ++c) {
        double v = ref_decode(s, c);
        if (std::isnan(v) || std::isinf(v)) continue;
        double d = std::fabs(a - v);
        if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
    }
    if (best == 0 && s.fnuz) return 0;
    return sign_code(s, neg) | best;
}

bool same_float(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

TEST(LowpFloat, NamesAndOnnxNumbers) {
    EXPECT_EQ(dtype_from_name("f8e4m3fn"), DType::kFloat8E4M3FN);
    EXPECT_EQ(dtype_from_name("f8e5m2fnuz"), DType::kFloat8E5M2FNUZ);
    EXPECT_EQ(dtype_from_name("i4"), DType::kInt4);
    EXPECT_EQ(dtype_from_name("f4e2m1"), DType::kFloat4E2M1);
    EXPECT_EQ(dtype_from_onnx(17), DType::kFloat8E4M3FN);  // TensorProto.FLOAT8E4M3FN
    EXPECT_EQ(dtype_from_onnx(20), DType::kFloat8E5M2FNUZ);
    EXPECT_EQ(dtype_from_onnx(21), DType::kUInt4);
    EXPECT_EQ(dtype_from_onnx(22), DType::kInt4);
    EXPECT_EQ(dtype_from_onnx(23), DType::kFloat4E2M1);
    EXPECT_EQ(dtype_from_onnx(24), DType::kFloat8E8M0);
    EXPECT_EQ(dtype_size(DType::kInt4), 1u);  // unpacked inside Kiln
    EXPECT_TRUE(dtype_is_float(DType::kFloat8E8M0));
    EXPECT_TRUE(dtype_is_signed_int(DType::kInt4));
    EXPECT_TRUE(dtype_is_unsigned_int(DType::kUInt4));
    EXPECT_FALSE(dtype_from_numpy_descr("").has_value());
}

TEST(LowpFloat, KnownValuesFromTheOnnxSpec) {
    EXPECT_EQ(lowp_to_float(DType::kFloat8E4M3FN, 0x7e), 448.0f);
    EXPECT_TRUE(std::isnan(lowp_to_float(DType::kFloat8E4M3FN, 0x7f)));
    EXPECT_EQ(lowp_to_float(DType::kFloat8E4M3FNUZ, 0x7f), 240.0f);
    EXPECT_TRUE(std::isnan(lowp_to_float(DType::kFloat8E4M3FNUZ, 0x80)));
    EXPECT_EQ(lowp_to_float(DType::kFloat8E5M2, 0x7b), 57344.0f);
    EXPECT_EQ(lowp_to_float(DType::kFloat8E5M2, 0x7c), INFINITY);
    EXPECT_EQ(lowp_to_float(DType::kFloat8E4M3FN, 0x01), std::ldexp(1.0f, -9));  // smallest subnormal
    EXPECT_EQ(lowp_to_float(DType::kFloat4E2M1, 0x7), 6.0f);
    EXPECT_EQ(lowp_to_float(DType::kFloat4E2M1, 0x9), -0.5f);
    EXPECT_EQ(lowp_to_float(DType::kFloat8E8M0, 127), 1.0f);
    EXPECT_EQ(lowp_to_float(DType::kFloat8E8M0, 0), std::ldexp(1.0f, -127));
    EXPECT_TRUE(std::isnan(lowp_to_float(DType::kFloat8E8M0, 0xff)));
    for (const Spec& s : kSpecs) EXPECT_EQ(lowp_max_finite(s.t), static_cast<float>(s.max)) << dtype_name(s.t);
    EXPECT_EQ(lowp_max_finite(DType::kFloat8E8M0), std::ldexp(1.0f, 127));
    // The saturate tables of Cast-19.
    EXPECT_EQ(float_to_lowp(DType::kFloat8E4M3FN, INFINITY, true), 0x7e);
    EXPECT_EQ(float_to_lowp(DType::kFloat8E4M3FN, -INFINITY, false), 0xff);  // -NaN
    EXPECT_EQ(float_to_lowp(DType::kFloat8E4M3FNUZ, -0.0f, false), 0x00);
    EXPECT_EQ(float_to_lowp(DType::kFloat8E5M2, 1e6f, false), 0x7c);  // inf
    EXPECT_EQ(float_to_lowp(DType::kFloat8E5M2FNUZ, -1e6f, false), 0x80);
    EXPECT_EQ(float_to_lowp(DType::kFloat8E5M2FNUZ, -1e6f, true), 0xff);  // -57344
    // The packed bytes of the ONNX test test_cast_FLOAT_to_FLOAT4E2M1 (01 e2 7f 07 78 f7 0e 08).
    const float in[] = {0.48f, 0.25f, 1.05f, -3.5f, -8, 9, 1e6f, 1e-7f, NAN, INFINITY, INFINITY, -INFINITY,
                        -4, 0.01f, -0.0f};
    const uint8_t want[] = {1, 0, 2, 0xe, 0xf, 7, 7, 0, 8, 7, 7, 0xf, 0xe, 0, 8};
    for (int i = 0; i < 15; ++i) EXPECT_EQ(float_to_lowp(DType::kFloat4E2M1, in[i]), want[i]) << in[i];
}

TEST(LowpFloat, DecodeMatchesFormulaForEveryCode) {
    for (const Spec& s : kSpecs) {
        for (int c = 0; c < ncodes(s); ++c) {
            float got = lowp_to_float(s.t, static_cast<uint8_t>(c));
            double want = ref_decode(s, c);
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got)) << dtype_name(s.t) << " code " << c;
            } else {
                EXPECT_TRUE(same_float(got, static_cast<float>(want))) << dtype_name(s.t) << " code " << c;
            }
        }
    }
    for (int c = 0; c < 255; ++c) EXPECT_EQ(lowp_to_float(DType::kFloat8E8M0, c), std::ldexp(1.0f, c - 127));
}

// Every finite code value, the midpoints between neighbours, one f32 ulp either side of them,
// specials and random floats over the whole range.
std::vector<float> probe_values(const Spec& s) {
    std::vector<double> vals;
    for (int c = 0; c < ncodes(s) / 2; ++c) {
        double v = ref_decode(s, c);
        if (!std::isnan(v) && !std::isinf(v)) vals.push_back(v);
    }
    std::sort(vals.begin(), vals.end());
    std::vector<float> out;
    for (size_t i = 0; i < vals.size(); ++i) {
        double next = i + 1 < vals.size() ? vals[i + 1] : vals[i] + (vals[i] - vals[i - 1]);
        for (double v : {vals[i], (vals[i] + next) / 2}) {
            float f = static_cast<float>(v);
            for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
                out.push_back(g);
                out.push_back(-g);
            }
        }
    }
    for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-7f, -1e-7f, 1e6f, -1e6f, 1e-40f,
                    std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})
        out.push_back(f);
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        uint32_t bits = rng();
        float f;
        std::memcpy(&f, &bits, 4);
        out.push_back(f);
        out.push_back(std::ldexp(static_cast<float>(rng() % 100000) / 100000.0f, static_cast<int>(rng() % 40) - 24));
    }
    return out;
}

TEST(LowpFloat, EncodeMatchesBruteForceNearestEven) {
    for (const Spec& s : kSpecs) {
        for (float x : probe_values(s)) {
            for (bool sat : {true, false}) {
                int want = ref_encode(s, x, sat);
                int got = float_to_lowp(s.t, x, sat);
                ASSERT_EQ(got, want) << dtype_name(s.t) << " of " << x << " saturate=" << sat;
            }
        }
    }
}

TEST(LowpFloat, E8M0RoundingModes) {
    // Reference: the power-of-two exponent by frexp, rounded per mode.
    std::mt19937 rng(3);
    for (int i = 0; i < 100000; ++i) {
        uint32_t bits = rng() & 0x7fffffffu;
        if (i < 16) bits = std::vector<uint32_t>{0, 1, 0x400000, 0x7fffff, 0x800000, 0x3f800000, 0x3fc00000,
                                                 0x3fc00001, 0x3fbfffff, 0x7f000000, 0x7f000001, 0x7f7fffff,
                                                 0x7f400000, 0x7f800000, 0x7fc00000, 0x00c00000}[i];
        float x;
        std::memcpy(&x, &bits, 4);
        if (std::isnan(x)) {
            EXPECT_EQ(float_to_e8m0(x, true), 0xff);
            continue;
        }
        if (std::isinf(x)) {
            EXPECT_EQ(float_to_e8m0(x, true), 0xfe);
            EXPECT_EQ(float_to_e8m0(x, false), 0xff);
            continue;
        }
        const int biased = static_cast<int>(bits >> 23);  // 2^(biased-127) <= x < 2^(biased-126)
        const double lo = biased == 0 ? 0.0 : std::ldexp(1.0, biased - 127);
        const bool exact = x == lo;
        const double frac = biased == 0 ? 0 : static_cast<double>(x) / lo - 1.0;  // in [0, 1)
        for (bool sat : {true, false}) {
            auto clampinc = [&](bool up) {
                if (!up) return biased;
                if (biased == 0xfe) return sat ? 0xfe : 0xff;
                return biased + 1;
            };
            EXPECT_EQ(float_to_e8m0(x, sat, E8M0Round::kUp), clampinc(!exact && bits != 0)) << x;
            EXPECT_EQ(float_to_e8m0(x, sat, E8M0Round::kDown), biased) << x;
            bool near_up = biased == 0 ? (bits & 0x7fffff) > 0x400000 : frac >= 0.5;
            EXPECT_EQ(float_to_e8m0(x, sat, E8M0Round::kNearest), clampinc(near_up)) << x;
        }
    }
    // The inputs of the ONNX test test_cast_e8m0_FLOAT_to_FLOAT8E8M0 (round up, saturate).
    EXPECT_EQ(float_to_e8m0(0.0f), 0);
    EXPECT_EQ(float_to_e8m0(0.124f), 124);  // 2^-3 = 0.125
    EXPECT_EQ(float_to_e8m0(0.25f), 125);
    EXPECT_EQ(float_to_e8m0(1.1f), 128);
    EXPECT_EQ(float_to_e8m0(8.0f), 130);
}

TEST(LowpFloat, Int4WrapsAndTensorAccessors) {
    for (int v = -40; v <= 40; ++v) {
        int want = ((v % 16) + 16) % 16;
        EXPECT_EQ(wrap_uint4(v), want);
        EXPECT_EQ(wrap_int4(v), want >= 8 ? want - 16 : want);
    }
    Tensor t(DType::kInt4, {3});
    t.set_i64(0, 7), t.set_i64(1, 8), t.set_f64(2, -9.5);
    EXPECT_EQ(t.get_i64(0), 7);
    EXPECT_EQ(t.get_i64(1), -8);
    EXPECT_EQ(t.get_i64(2), 7);  // -9 wraps
    Tensor f(DType::kFloat8E4M3FN, {2});
    f.set_f64(0, 0.3), f.set_f64(1, 1e6);  // storage conversion: no saturation
    EXPECT_EQ(f.get_f64(0), 0.3125);
    EXPECT_TRUE(std::isnan(f.get_f64(1)));
}

}  // namespace
}  // namespace kiln
