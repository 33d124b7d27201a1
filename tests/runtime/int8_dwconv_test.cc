// The VNNI depthwise conv (runtime/int8_dwconv.h) against a direct loop written here, exactly:
// the int32 sum of (x - x_zp) * w over the window (padding contributes 0) plus the bias, then
// ONNX Runtime's requantization in f32 (product, clamp to the type's range less y_zp, round to
// nearest even, + y_zp). Cases: 3x3 and 5x5, stride 1 and 2, pads 0 to 2 and uneven ends,
// channels not a multiple of 16, widths below and above a strip of 8, two images, u8 and s8 y,
// and scales large enough to saturate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/int8_dwconv.h"

namespace kiln::runtime {
namespace {

struct DwCase {
    int64_t n, c, h, w, k, stride, pad;
    bool y_signed = false;
    float scale_max = 0.01f;  // large ones saturate
};

void check(const DwCase& dc) {
    std::mt19937 rng(static_cast<unsigned>(dc.c * 31 + dc.h * 7 + dc.k + dc.stride * 3 + dc.y_signed));
    Int8DwShape s;
    s.n = dc.n, s.c = dc.c, s.h = dc.h, s.w = dc.w, s.k = dc.k, s.stride = dc.stride;
    s.pad_top = s.pad_left = dc.pad;
    s.oh = (dc.h + 2 * dc.pad - dc.k) / dc.stride + 1;
    s.ow = (dc.w + 2 * dc.pad - dc.k) / dc.stride + 1;
    const int64_t taps = dc.k * dc.k;
    std::vector<uint8_t> x(static_cast<size_t>(dc.n * dc.h * dc.w * dc.c));
    for (uint8_t& v : x) v = static_cast<uint8_t>(rng() % 256);
    std::vector<int8_t> w(static_cast<size_t>(dc.c * taps));
    for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    std::vector<int32_t> bias(static_cast<size_t>(dc.c));
    for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 40001) - 20000;
    std::vector<float> scales(static_cast<size_t>(dc.c));
    for (float& v : scales) v = dc.scale_max * static_cast<float>(1 + rng() % 1000) / 1000.f;
    const int32_t x_zp = 131, y_zp = dc.y_signed ? 5 : 60;
    Int8DwConv dw(s, w.data(), bias.data(), scales, x_zp, y_zp, dc.y_signed);
    ASSERT_EQ(dw.tasks(), dc.n * s.oh * ((dc.c + 15) / 16));
    std::vector<uint8_t> y(static_cast<size_t>(dc.n * s.oh * s.ow * dc.c), 0xAB);
    // Three calls splitting the tasks, as three threads would (a split inside a row's blocks).
    const int64_t third = dw.tasks() / 3;
    dw.run(x.data(), y.data(), 0, third);
    dw.run(x.data(), y.data(), third, 2 * third);
    dw.run(x.data(), y.data(), 2 * third, dw.tasks());
    const float qmin = dc.y_signed ? -128.f : 0.f, qmax = dc.y_signed ? 127.f : 255.f;
    for (int64_t n = 0; n < dc.n; ++n)
        for (int64_t i = 0; i < s.oh; ++i)
            for (int64_t j = 0; j < s.ow; ++j)
                for (int64_t c = 0; c < dc.c; ++c) {
                    int64_t acc = bias[static_cast<size_t>(c)];
                    for (int64_t u = 0; u < dc.k; ++u)
                        for (int64_t v = 0; v < dc.k; ++v) {
                            const int64_t r = i * dc.stride + u - dc.pad, q = j * dc.stride + v - dc.pad;
                            if (r < 0 || r >= dc.h || q < 0 || q >= dc.w) continue;
                            const int64_t xv = x[static_cast<size_t>(((n * dc.h + r) * dc.w + q) * dc.c + c)];
                            acc += (xv - x_zp) * w[static_cast<size_t>(c * taps + u * dc.k + v)];
                        }
                    float f = static_cast<float>(acc) * scales[static_cast<size_t>(c)];
                    f = std::min(std::max(f, qmin - static_cast<float>(y_zp)), qmax - static_cast<float>(y_zp));
                    const int64_t want = static_cast<int64_t>(std::nearbyint(f)) + y_zp;
                    const uint8_t raw = y[static_cast<size_t>(((n * s.oh + i) * s.ow + j) * dc.c + c)];
                    const int64_t got = dc.y_signed ? static_cast<int8_t>(raw) : raw;
                    ASSERT_EQ(got, want) << dc.c << "ch " << dc.h << "x" << dc.w << " k" << dc.k << " s" << dc.stride
                                         << " p" << dc.pad << ": image " << n << " at " << i << "," << j
                                         << " channel " << c << " acc " << acc;
                }
}

TEST(Int8DwConv, ExactAgainstAnIntegerLoop) {
    if (!Int8DwConv::available()) GTEST_SKIP() << "no AVX-512 VNNI on this host";
    check({1, 32, 12, 12, 3, 1, 1});                           // strips of 8 and 4 and edge pixels
    check({1, 144, 9, 21, 3, 1, 1});                           // 9 blocks, 21 columns: 8 + 8 + 4 + 1
    check({2, 40, 7, 7, 3, 1, 1});                             // two images, a partial block of 8 channels
    check({1, 96, 14, 14, 3, 2, 1});                           // stride 2, uneven end pad
    check({1, 24, 15, 17, 3, 2, 1});                           // stride 2, odd sizes
    check({1, 48, 10, 11, 5, 1, 2});                           // 5x5, pads of 2
    check({1, 20, 9, 13, 5, 2, 2});                            // 5x5 stride 2, partial block
    check({1, 16, 5, 6, 3, 1, 0});                             // no pads
    check({1, 16, 1, 1, 3, 1, 1});                             // one pixel: every tap but the centre padded
    check({1, 33, 8, 9, 3, 2, 1, true, 0.5f});                 // s8 y, saturating
    check({1, 64, 6, 30, 3, 1, 1, false, 0.2f});               // saturating, long rows
    check({1, 48, 7, 26, 5, 1, 2, true, 0.05f});               // 5x5, s8 y, strips of 8 at 5x5
}

TEST(Int8DwConv, RejectsAWindowItDoesNotRun) {
    EXPECT_FALSE(Int8DwConv::handles(7, 7, 1, 1, 1, 1, 3, 3));
    EXPECT_FALSE(Int8DwConv::handles(3, 3, 1, 1, 2, 2, 1, 1));  // dilated
    EXPECT_FALSE(Int8DwConv::handles(3, 3, 1, 2, 1, 1, 1, 1));  // unequal strides
    EXPECT_TRUE(Int8DwConv::handles(3, 3, 2, 2, 1, 1, 0, 0));
    Int8DwShape s;
    s.c = 8, s.h = 4, s.w = 4, s.oh = 4, s.ow = 4, s.k = 7, s.pad_top = s.pad_left = 3;
    std::vector<int8_t> w(8 * 49);
    EXPECT_ANY_THROW(Int8DwConv(s, w.data(), nullptr, std::vector<float>(8, 1.f), 0, 0, false));
}

}  // namespace
}  // namespace kiln::runtime
