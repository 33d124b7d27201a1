// The prelude's vectorizable f32 exp, erf, sigmoid and tanh (c_prelude.cc) against libm in double, over a dense
// sweep of float bit patterns (every 61st pattern over all 2^32, every 3rd over the ranges where
// the results are neither 0, 1 nor inf) plus the specials. The kernel under test is a
// vectorized tir loop, so the sweep exercises the code GCC vectorizes.
// Bounds (the ones c_prelude.cc states):
//   exp: <= 2 ulp of the exact result (2^-149 for subnormal results); inf/0/NaN at the extremes;
//   erf: <= 4e-7 absolute, <= 2 ulp for |x| < 1; +-1 at +-inf; NaN -> NaN.
//   sigmoid: <= 4 ulp of the exact result (2^-149 for subnormal results); 1 at +inf, 0 at -inf.
//   tanh: <= 2 ulp of the exact result; +-1 at +-inf, -0 at -0; NaN -> NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernel_test_util.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::Expr;

constexpr int64_t kChunk = int64_t{1} << 22;

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// One ulp of the float nearest the exact value r (2^-149 at and below the subnormal range).
double ulp_of(double r) {
    r = std::fabs(r);
    if (r < std::ldexp(1.0, -126)) return std::ldexp(1.0, -149);
    return std::ldexp(1.0, std::ilogb(r) - 23);
}

LoadedKernel unary_kernel(te::UnaryOp op) {
    auto in = te::make_buffer("x", DType::kFloat32, {kChunk});
    auto out = te::make_buffer("y", DType::kFloat32, {kChunk});
    te::Var i = te::make_var("i");
    Expr v = te::unary(op, std::make_shared<te::BufferLoadNode>(DType::kFloat32, in, i));
    tir::PrimFunc f{"kiln_math", {in, out}, tir::make_for(i, te::int_imm(kChunk), te::LoopKind::kVectorized,
                                                          tir::make_store(out, i, v))};
    return compile_func(f);
}

// Runs k over every input the visitor produces, calling check(x, got) for each.
void sweep(const LoadedKernel& k, const std::vector<uint32_t>& patterns,
           const std::function<void(float, float)>& check) {
    std::vector<Tensor> args = {Tensor(DType::kFloat32, {kChunk}), Tensor(DType::kFloat32, {kChunk})};
    float* x = args[0].data_as<float>();
    const float* y = args[1].data_as<float>();
    for (size_t base = 0; base < patterns.size(); base += kChunk) {
        int64_t n = std::min<int64_t>(kChunk, static_cast<int64_t>(patterns.size() - base));
        for (int64_t j = 0; j < kChunk; ++j) x[j] = from_bits(patterns[base + (j < n ? j : 0)]);
        ASSERT_EQ(k.run(args), 0);
        for (int64_t j = 0; j < n; ++j) check(x[j], y[j]);
    }
}

// Every 61st bit pattern, every 3rd in [lo, hi] and [-hi, -lo], and the specials.
std::vector<uint32_t> patterns(float lo, float hi) {
    std::vector<uint32_t> p;
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 61) p.push_back(static_cast<uint32_t>(u));
    uint32_t a, b;
    std::memcpy(&a, &lo, 4);
    std::memcpy(&b, &hi, 4);
    for (uint32_t u = a; u <= b; u += 3) {
        p.push_back(u);
        p.push_back(u | 0x80000000u);
    }
    for (float s : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 3.4028235e38f, -3.4028235e38f,
                    88.72283f, 88.72284f, 88.7229f, -87.33655f, -103.27893f, -103.97208f, -104.0f, 3.925f, -3.925f,
                    3.92f, 1.0f, -1.0f, 0.5f})
        p.push_back(std::bit_cast<uint32_t>(s));
    return p;
}

TEST(CMath, ExpWithin2UlpOverAllFloats) {
    LoadedKernel k = unary_kernel(te::UnaryOp::kExp);
    EXPECT_EQ(k.source.find("expf("), std::string::npos) << "f32 exp must not call libm";
    double worst = 0;
    float worst_x = 0;
    int64_t bad = 0;
    sweep(k, patterns(1e-8f, 104.0f), [&](float x, float got) {
        double ref = std::exp(static_cast<double>(x));
        if (std::isnan(x)) {
            if (!std::isnan(got) && bad++ < 5) ADD_FAILURE() << "exp(NaN) = " << got;
            return;
        }
        if (std::isinf(static_cast<float>(ref)) || std::isinf(got)) {
            if (static_cast<float>(ref) != got && bad++ < 5) ADD_FAILURE() << "exp(" << x << ") = " << got << ", want " << ref;
            return;
        }
        double err = std::fabs(static_cast<double>(got) - ref) / ulp_of(ref);
        if (err > worst) worst = err, worst_x = x;
    });
    EXPECT_EQ(bad, 0);
    EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
    std::printf("exp: max error %.3f ulp at x = %.9g\n", worst, worst_x);
}

TEST(CMath, ErfWithin4e7AbsoluteOverAllFloats) {
    LoadedKernel k = unary_kernel(te::UnaryOp::kErf);
    EXPECT_EQ(k.source.find("erff("), std::string::npos) << "f32 erf must not call libm";
    double worst_abs = 0, worst_ulp_small = 0;
    float worst_abs_x = 0, worst_ulp_x = 0;
    int64_t bad = 0;
    sweep(k, patterns(1e-8f, 4.0f), [&](float x, float got) {
        if (std::isnan(x)) {
            if (!std::isnan(got) && bad++ < 5) ADD_FAILURE() << "erf(NaN) = " << got;
            return;
        }
        double ref = std::erf(static_cast<double>(x));
        if (std::isnan(got) || std::signbit(got) != std::signbit(ref)) {
            if (bad++ < 5) ADD_FAILURE() << "erf(" << x << ") = " << got << ", want " << ref;
            return;
        }
        double err = std::fabs(static_cast<double>(got) - ref);
        if (err > worst_abs) worst_abs = err, worst_abs_x = x;
        if (std::fabs(x) < 1.0f && err / ulp_of(ref) > worst_ulp_small) worst_ulp_small = err / ulp_of(ref), worst_ulp_x = x;
    });
    EXPECT_EQ(bad, 0);
    EXPECT_LE(worst_abs, 4e-7) << "at x = " << worst_abs_x;
    EXPECT_LE(worst_ulp_small, 2.0) << "at x = " << worst_ulp_x;
    std::printf("erf: max abs error %.3g at x = %.9g; max %.3f ulp for |x| < 1 at x = %.9g\n", worst_abs,
                worst_abs_x, worst_ulp_small, worst_ulp_x);
}

TEST(CMath, SigmoidWithin4UlpOverAllFloats) {
    LoadedKernel k = unary_kernel(te::UnaryOp::kSigmoid);
    EXPECT_EQ(k.source.find("exp(-(double)"), std::string::npos) << "f32 sigmoid must not call libm";
    double worst = 0;
    float worst_x = 0;
    int64_t bad = 0;
    sweep(k, patterns(1e-8f, 104.0f), [&](float x, float got) {
        if (std::isnan(x)) {
            if (!std::isnan(got) && bad++ < 5) ADD_FAILURE() << "sigmoid(NaN) = " << got;
            return;
        }
        double ref = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
        double err = std::fabs(static_cast<double>(got) - ref) / ulp_of(ref);
        if (err > worst) worst = err, worst_x = x;
    });
    EXPECT_EQ(bad, 0);
    EXPECT_LE(worst, 4.0) << "at x = " << worst_x;
    std::printf("sigmoid: max error %.3f ulp at x = %.9g\n", worst, worst_x);
    std::vector<uint32_t> ends = {std::bit_cast<uint32_t>(INFINITY), std::bit_cast<uint32_t>(-INFINITY)};
    std::vector<float> got;
    sweep(k, ends, [&](float, float y) { got.push_back(y); });
    EXPECT_EQ(got[0], 1.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(got[1]), 0u);
}

TEST(CMath, TanhWithin2UlpOverAllFloats) {
    LoadedKernel k = unary_kernel(te::UnaryOp::kTanh);
    EXPECT_EQ(k.source.find("tanhf("), std::string::npos) << "f32 tanh must not call libm";
    double worst = 0;
    float worst_x = 0;
    int64_t bad = 0;
    sweep(k, patterns(1e-8f, 9.1f), [&](float x, float got) {
        if (std::isnan(x)) {
            if (!std::isnan(got) && bad++ < 5) ADD_FAILURE() << "tanh(NaN) = " << got;
            return;
        }
        double ref = std::tanh(static_cast<double>(x));
        double err = std::fabs(static_cast<double>(got) - ref) / ulp_of(ref);
        if (err > worst) worst = err, worst_x = x;
    });
    EXPECT_EQ(bad, 0);
    EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
    std::printf("tanh: max error %.3f ulp at x = %.9g\n", worst, worst_x);
    std::vector<uint32_t> ends = {std::bit_cast<uint32_t>(INFINITY), std::bit_cast<uint32_t>(-INFINITY),
                                  std::bit_cast<uint32_t>(-0.0f)};
    std::vector<float> got;
    sweep(k, ends, [&](float, float y) { got.push_back(y); });
    EXPECT_EQ(got[0], 1.0f);
    EXPECT_EQ(got[1], -1.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(got[2]), 0x80000000u);
}

TEST(CMath, ExactAtTheExtremes) {
    LoadedKernel e = unary_kernel(te::UnaryOp::kExp);
    LoadedKernel f = unary_kernel(te::UnaryOp::kErf);
    std::vector<uint32_t> p;
    for (float s : {INFINITY, -INFINITY, 0.0f, -0.0f, 1000.0f, -1000.0f, 3.4028235e38f, -3.4028235e38f})
        p.push_back(std::bit_cast<uint32_t>(s));
    std::vector<float> ge, gf;
    sweep(e, p, [&](float, float y) { ge.push_back(y); });
    sweep(f, p, [&](float, float y) { gf.push_back(y); });
    const float want_e[] = {INFINITY, 0.0f, 1.0f, 1.0f, INFINITY, 0.0f, INFINITY, 0.0f};
    const float want_f[] = {1.0f, -1.0f, 0.0f, -0.0f, 1.0f, -1.0f, 1.0f, -1.0f};
    for (size_t i = 0; i < p.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(ge[i]), std::bit_cast<uint32_t>(want_e[i])) << "exp(" << from_bits(p[i]) << ")";
        EXPECT_EQ(std::bit_cast<uint32_t>(gf[i]), std::bit_cast<uint32_t>(want_f[i])) << "erf(" << from_bits(p[i]) << ")";
    }
}

}  // namespace
}  // namespace kiln::codegen
