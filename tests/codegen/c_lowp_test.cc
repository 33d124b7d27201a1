// The C prelude's low-precision conversions (a port of support/lowp_float.cc) against the
// support functions (tested against a brute-force reference in tests/support/lowp_float_test.cc)
// and against the tir interpreter: every bit pattern loads exactly, stores round alike, and
// i4/u4 stores wrap to 4 bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "codegen/c_emitter.h"
#include "kernel_test_util.h"
#include "tir/interpreter.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::Expr;
using tir::PrimFunc;

Expr load(const te::Buffer& b, Expr idx) {
    return std::make_shared<te::BufferLoadNode>(te::compute_dtype(b->dtype), b, std::move(idx));
}
Expr i64(int64_t v) { return std::make_shared<te::IntImmNode>(DType::kInt64, v); }
PrimFunc map_func(const std::string& name, std::vector<te::Buffer> params, int64_t n,
                  const std::function<Expr(Expr)>& body) {
    te::Var i = te::make_var("i");
    const te::Buffer& out = params.back();
    return PrimFunc{name, params, tir::make_for(i, i64(n), te::LoopKind::kSerial, tir::make_store(out, i, body(i)))};
}

const DType kLowpFloats[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                             DType::kFloat8E5M2FNUZ, DType::kFloat8E8M0,   DType::kFloat4E2M1};

uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

TEST(CLowp, LoadsAreExactForAllBitPatterns) {
    for (DType t : kLowpFloats) {
        const int64_t n = t == DType::kFloat4E2M1 ? 16 : 256;
        auto L = te::make_buffer("L", t, {n});
        auto F = te::make_buffer("F", DType::kFloat32, {n});
        PrimFunc f = map_func("widen", {L, F}, n, [&](Expr i) { return load(L, i); });
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(t, {n}), Tensor(DType::kFloat32, {n})};
        for (int64_t i = 0; i < n; ++i) args[0].data_as<uint8_t>()[i] = static_cast<uint8_t>(i);
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        for (int64_t i = 0; i < n; ++i) {
            float want = lowp_to_float(t, static_cast<uint8_t>(i));
            float got = args[1].data_as<float>()[i];
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " code " << i;
            } else {
                EXPECT_EQ(f32_bits(got), f32_bits(want)) << dtype_name(t) << " code " << i;
            }
        }
        EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(t);
    }
}

TEST(CLowp, StoresRoundLikeSupportAndInterpreter) {
    const int64_t n = 1 << 16;
    std::mt19937 rng(11);
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = static_cast<uint32_t>(rng());
        if (i % 2) bits = (bits & 0x807fffffu) | (static_cast<uint32_t>(100 + i % 60) << 23);  // near the grids
        std::memcpy(&xs[i], &bits, 4);
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 448.0f, 464.0f, 465.0f, 61440.0f, 6.0f, 7.0f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) xs[i] = specials[i];
    for (DType t : kLowpFloats) {
        auto F = te::make_buffer("F", DType::kFloat32, {n});
        auto L = te::make_buffer("L", t, {n});
        PrimFunc f = map_func("narrow", {F, L}, n, [&](Expr i) { return load(F, i); });
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(DType::kFloat32, {n}), Tensor(t, {n})};
        std::memcpy(args[0].data(), xs.data(), n * 4);
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        for (int64_t i = 0; i < n; ++i) {
            uint8_t want = t == DType::kFloat8E8M0 ? float_to_e8m0(xs[i], false) : float_to_lowp(t, xs[i], false);
            ASSERT_EQ(args[1].data_as<uint8_t>()[i], want) << dtype_name(t) << " of " << xs[i];
        }
        EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(t);
    }
}

TEST(CLowp, Int4StoresWrap) {
    const int64_t n = 64;
    for (DType t : {DType::kInt4, DType::kUInt4}) {
        auto X = te::make_buffer("X", DType::kInt32, {n});
        auto Y = te::make_buffer("Y", t, {n});
        PrimFunc f = map_func("wrap4", {X, Y}, n, [&](Expr i) { return load(X, i); });
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(DType::kInt32, {n}), Tensor(t, {n})};
        for (int64_t i = 0; i < n; ++i) args[0].set_i64(i, i - 32);
        auto ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(f, ref);
        for (int64_t i = 0; i < n; ++i) {
            int64_t v = i - 32, want = ((v % 16) + 16) % 16;
            if (t == DType::kInt4 && want >= 8) want -= 16;
            EXPECT_EQ(args[1].get_i64(i), want) << dtype_name(t) << " of " << v;
        }
        EXPECT_TRUE(bits_equal(args[1], ref[1])) << dtype_name(t);
    }
}

}  // namespace
}  // namespace kiln::codegen
