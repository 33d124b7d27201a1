// DType table and half / bfloat16 conversions. Expected bit patterns were computed with numpy
// (np.float32(x).astype(np.float16).view(np.uint16)) and, for bf16, by rounding the upper 16
// bits of the float32 pattern to nearest even in Python integer arithmetic.
#include "support/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

TEST(DType, NamesSizesAndDescr) {
    EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
    EXPECT_EQ(dtype_size(DType::kInt64), 8u);
    EXPECT_EQ(dtype_size(DType::kBool), 1u);
    for (int i = 0; i <= static_cast<int>(DType::kBool); ++i) {
        auto t = static_cast<DType>(i);
        EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
        EXPECT_EQ(dtype_from_numpy_descr(dtype_numpy_descr(t)), t) << dtype_name(t);
        EXPECT_EQ(dtype_from_onnx(dtype_to_onnx(t)), t) << dtype_name(t);
    }
    EXPECT_EQ(dtype_from_name("float"), std::nullopt);
    EXPECT_EQ(dtype_from_numpy_descr(">f4"), std::nullopt);
    EXPECT_EQ(dtype_to_onnx(DType::kFloat32), 1);    // TensorProto.FLOAT
    EXPECT_EQ(dtype_to_onnx(DType::kInt64), 7);      // TensorProto.INT64
    EXPECT_EQ(dtype_to_onnx(DType::kBFloat16), 16);  // TensorProto.BFLOAT16
    EXPECT_TRUE(dtype_is_float(DType::kBFloat16));
    EXPECT_TRUE(dtype_is_int(DType::kUInt8));
    EXPECT_FALSE(dtype_is_int(DType::kBool));
}

TEST(Half, FloatToHalfKnownValues) {
    EXPECT_EQ(float_to_half(1.0f), 0x3C00);
    EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
    EXPECT_EQ(float_to_half(0.1f), 0x2E66);
    EXPECT_EQ(float_to_half(-2.0f), 0xC000);
    EXPECT_EQ(float_to_half(0.333333f), 0x3555);
    EXPECT_EQ(float_to_half(-0.0f), 0x8000);
    EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
    EXPECT_EQ(float_to_half(1e6f), 0x7C00);      // overflow -> inf
    EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);  // just below the rounding point to inf
    EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // halfway to 2^16 rounds to inf
    EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST(Half, RoundToNearestEven) {
    EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, even is down
    EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, even is up
}

TEST(Half, Subnormals) {
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0 -> even (0)
    EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie 1.5 ulp -> even 2
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
    EXPECT_EQ(float_to_half(1e-8f), 0x0000);
    EXPECT_EQ(half_to_float(0x0001), 5.960464477539063e-08f);
    EXPECT_EQ(half_to_float(0x03FF), 6.097555160522461e-05f);  // largest subnormal
    EXPECT_EQ(half_to_float(0x0400), 6.103515625e-05f);
}

TEST(Half, HalfToFloatKnownValues) {
    EXPECT_EQ(half_to_float(0x3C00), 1.0f);
    EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
    EXPECT_EQ(half_to_float(0xC000), -2.0f);
    EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
    EXPECT_TRUE(std::isinf(half_to_float(0x7C00)));
    EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
    EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
    // Every finite half survives half -> float -> half.
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if ((h & 0x7C00) == 0x7C00) continue;
        ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << std::hex << h;
    }
}

TEST(BFloat16, KnownValues) {
    EXPECT_EQ(float_to_bfloat16(0.1f), 0x3DCD);
    EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
    EXPECT_EQ(float_to_bfloat16(-123.5f), 0xC2F7);
    EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even (down)
    EXPECT_EQ(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
    EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
              0x3F81);                              // above tie
    EXPECT_EQ(float_to_bfloat16(3.4e38f), 0x7F80);  // rounds up into inf
    EXPECT_EQ(float_to_bfloat16(1e-40f), 0x0001);   // subnormal
    EXPECT_EQ(bfloat16_to_float(0x3DCD), 0.10009765625f);
    EXPECT_EQ(bfloat16_to_float(0xC2F7), -123.5f);
    EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
}

}  // namespace
}  // namespace kiln
