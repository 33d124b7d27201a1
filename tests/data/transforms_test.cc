// The built-in map stages, checked against values computed here by hand.
#include "data/transforms.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "support/error.h"

namespace kiln::data {
namespace {

// f32 [C,H,W] with x[c,y,x] = 100 c + 10 y + x.
Tensor ramp(int64_t c, int64_t h, int64_t w) {
    Tensor t(DType::kFloat32, {c, h, w});
    for (int64_t k = 0; k < c; ++k)
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) t.data_as<float>()[(k * h + y) * w + x] = 100.f * k + 10.f * y + x;
    return t;
}

TEST(Transforms, NormalizePerChannel) {
    Example ex{{"image", ramp(2, 2, 3)}};
    Rng rng(0);
    normalize({1.0f, 100.0f}, {2.0f, 4.0f})(ex, rng);
    const float* x = ex.at("image").data_as<float>();
    EXPECT_FLOAT_EQ(x[0], (0 - 1.0f) / 2);
    EXPECT_FLOAT_EQ(x[5], (12 - 1.0f) / 2);
    EXPECT_FLOAT_EQ(x[6], (100 - 100.0f) / 4);
    EXPECT_FLOAT_EQ(x[11], (112 - 100.0f) / 4);
    Example one{{"image", ramp(3, 1, 1)}};
    normalize({0.5f}, {0.25f})(one, rng);
    EXPECT_FLOAT_EQ(one.at("image").data_as<float>()[2], (200 - 0.5f) / 0.25f);
    Example bad{{"image", ramp(3, 1, 1)}};
    EXPECT_THROW(normalize({0, 0}, {1, 1})(bad, rng), Error);
    EXPECT_THROW(normalize({0}, {1}, "pixels")(bad, rng), Error);
}

TEST(Transforms, RandomCropIsAWindowOfThePaddedImage) {
    const int64_t c = 2, h = 5, w = 6, ch = 4, cw = 4, pad = 2;
    std::set<std::pair<int64_t, int64_t>> offsets;
    for (uint64_t seed = 0; seed < 300; ++seed) {
        Example ex{{"image", ramp(c, h, w)}};
        Rng rng(seed);
        random_crop(ch, cw, pad)(ex, rng);
        const Tensor& t = ex.at("image");
        ASSERT_EQ(t.shape(), (Shape{c, ch, cw}));
        // Find the offset (in padded coordinates) whose window this is.
        int found = 0;
        for (int64_t y0 = 0; y0 <= h + 2 * pad - ch; ++y0)
            for (int64_t x0 = 0; x0 <= w + 2 * pad - cw; ++x0) {
                bool match = true;
                for (int64_t k = 0; k < c && match; ++k)
                    for (int64_t y = 0; y < ch && match; ++y)
                        for (int64_t x = 0; x < cw && match; ++x) {
                            int64_t sy = y0 + y - pad, sx = x0 + x - pad;
                            float want = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? 100.f * k + 10.f * sy + sx : 0.f;
                            match = t.data_as<float>()[(k * ch + y) * cw + x] == want;
                        }
                if (match) {
                    ++found;
                    offsets.insert({y0, x0});
                }
            }
        ASSERT_GE(found, 1) << "seed " << seed << ": not a window of the padded image";
    }
    // Every offset of the 6 x 7 possible ones turns up.
    EXPECT_EQ(offsets.size(), 6u * 7u);
    // Same Rng state, same crop.
    Example a{{"image", ramp(c, h, w)}}, b{{"image", ramp(c, h, w)}};
    Rng ra(42), rb(42);
    random_crop(ch, cw, pad)(a, ra);
    random_crop(ch, cw, pad)(b, rb);
    EXPECT_EQ(std::memcmp(a.at("image").data(), b.at("image").data(), a.at("image").nbytes()), 0);
    Example small{{"image", ramp(1, 2, 2)}};
    EXPECT_THROW(random_crop(5, 5, 1)(small, ra), Error);
}

TEST(Transforms, FlipHorizontal) {
    Rng rng(1);
    Example ex{{"image", ramp(2, 2, 3)}};
    random_flip_horizontal(1.0)(ex, rng);
    const float* x = ex.at("image").data_as<float>();
    EXPECT_EQ(x[0], 2.f);
    EXPECT_EQ(x[2], 0.f);
    EXPECT_EQ(x[3], 12.f);
    EXPECT_EQ(x[6 + 1], 101.f);
    Example same{{"image", ramp(2, 2, 3)}};
    random_flip_horizontal(0.0)(same, rng);
    EXPECT_EQ(same.at("image").data_as<float>()[0], 0.f);
    int flipped = 0;
    for (int i = 0; i < 1000; ++i) {
        Example e{{"image", ramp(1, 1, 2)}};
        random_flip_horizontal(0.5)(e, rng);
        flipped += e.at("image").data_as<float>()[0] == 1.f;
    }
    EXPECT_GT(flipped, 400);
    EXPECT_LT(flipped, 600);
}

TEST(Transforms, CastAndScale) {
    Rng rng(0);
    Tensor px(DType::kUInt8, {1, 1, 3});
    px.data_as<uint8_t>()[0] = 0;
    px.data_as<uint8_t>()[1] = 51;
    px.data_as<uint8_t>()[2] = 255;
    Tensor y(DType::kInt32, {});
    y.data_as<int32_t>()[0] = 7;
    Tensor d(DType::kFloat64, {2});
    d.data_as<double>()[0] = 0.25;
    d.data_as<double>()[1] = -3.5;
    Example ex{{"image", px}, {"labels", y}, {"x", d}};
    scale(1.0f / 255)(ex, rng);
    cast(DType::kInt64, "labels")(ex, rng);
    cast(DType::kFloat32, "x")(ex, rng);
    ASSERT_EQ(ex.at("image").dtype(), DType::kFloat32);
    EXPECT_FLOAT_EQ(ex.at("image").data_as<float>()[1], 0.2f);
    EXPECT_FLOAT_EQ(ex.at("image").data_as<float>()[2], 1.0f);
    ASSERT_EQ(ex.at("labels").dtype(), DType::kInt64);
    EXPECT_EQ(ex.at("labels").data_as<int64_t>()[0], 7);
    ASSERT_EQ(ex.at("x").dtype(), DType::kFloat32);
    EXPECT_EQ(ex.at("x").data_as<float>()[1], -3.5f);
    EXPECT_THROW(cast(DType::kInt64, "nothere")(ex, rng), Error);
}

}  // namespace
}  // namespace kiln::data
