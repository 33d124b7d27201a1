// ConvStrided1x1 (runtime/conv_strided_1x1.h), both gradients of a strided 1x1 conv, against
// float64 loops over the definitions: dX[n, c, h, w] = sum_m W[m, c] dY[n, m, h/s, w/s] where
// h and w are multiples of the strides (else 0), dW[m, c] = sum_{n, oh, ow} dY[n, m, oh, ow]
// X[n, c, oh*s, ow*s]. Planes of 64 output points and more run one sgemm per image, smaller
// ones one over the packed batch; both are covered. Shapes: ResNet's shortcuts (even and odd planes, a crop that leaves the
// last row and column unread), stride 3 and unequal strides (the scalar rows), rows longer than
// one vector, batch 1 on more threads than images, and a second call over dirty buffers.
#if KILN_HAVE_DNNL
#include "runtime/conv_strided_1x1.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = u(rng);
    return v;
}

/// A strided 1x1 conv's shape: X [n, c, h, w] read up to (crop_h, crop_w), dY [n, m, oh, ow].
ConvWeightGemmShape shape(int64_t n, int64_t c, int64_t m, int64_t h, int64_t w, int64_t sh, int64_t sw,
                          int64_t crop_h = 0, int64_t crop_w = 0) {
    ConvWeightGemmShape s;
    s.n = n, s.c = c, s.m = m, s.h = h, s.w = w, s.kh = s.kw = 1;
    s.crop_h = crop_h ? crop_h : h, s.crop_w = crop_w ? crop_w : w;
    s.stride_h = sh, s.stride_w = sw;
    s.oh = (s.crop_h - 1) / sh + 1, s.ow = (s.crop_w - 1) / sw + 1;
    return s;
}

double dy_at(const ConvWeightGemmShape& s, const std::vector<float>& dy, int64_t n, int64_t m, int64_t oh, int64_t ow) {
    return dy[static_cast<size_t>(((n * s.m + m) * s.oh + oh) * s.ow + ow)];
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
    double scale = 1e-30;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << "element " << i;
}

void check(const ConvWeightGemmShape& s, int threads) {
    SCOPED_TRACE("N" + std::to_string(s.n) + " C" + std::to_string(s.c) + " M" + std::to_string(s.m) + " " +
                 std::to_string(s.h) + "x" + std::to_string(s.w) + " stride " + std::to_string(s.stride_h) + "," +
                 std::to_string(s.stride_w) + " threads " + std::to_string(threads));
    ASSERT_TRUE(conv_strided_1x1_applies(s, true));
    const std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, 1);
    const std::vector<float> dy = random_floats(s.n * s.m * s.oh * s.ow, 2);
    const std::vector<float> w = random_floats(s.m * s.c, 3);
    std::vector<double> want_dx(x.size(), 0.0), want_dw(w.size(), 0.0);
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t oh = 0; oh < s.oh; ++oh)
                for (int64_t ow = 0; ow < s.ow; ++ow) {
                    const size_t xi = static_cast<size_t>(((n * s.c + c) * s.h + oh * s.stride_h) * s.w + ow * s.stride_w);
                    for (int64_t m = 0; m < s.m; ++m) {
                        want_dx[xi] += double(w[static_cast<size_t>(m * s.c + c)]) * dy_at(s, dy, n, m, oh, ow);
                        want_dw[static_cast<size_t>(m * s.c + c)] += dy_at(s, dy, n, m, oh, ow) * x[xi];
                    }
                }
    ThreadPool pool(threads);
    const ConvStrided1x1 k(s);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the lent buffers, dirty
        std::vector<float> dx(x.size(), 123.0f), dw(w.size(), 123.0f);
        ASSERT_TRUE(k.run_data(dy.data(), w.data(), dx.data(), pool.kernel_env(), threads).ok());
        ASSERT_TRUE(k.run_weights(x.data(), dy.data(), dw.data(), pool.kernel_env(), threads).ok());
        expect_near(dx, want_dx);
        expect_near(dw, want_dw);
    }
}

TEST(ConvStrided1x1, ResNetShortcutsMatchTheDefinition) {
    for (int threads : {1, 2}) {
        check(shape(4, 64, 128, 28, 28, 2, 2), threads);
        check(shape(3, 128, 256, 14, 14, 2, 2), threads);
        check(shape(2, 256, 512, 7, 7, 2, 2), threads);  // odd plane: the last column's zero falls past the row
    }
}

TEST(ConvStrided1x1, CropsStridesAndLongRows) {
    check(shape(2, 8, 12, 9, 9, 2, 2, 8, 8), 2);      // crop: the last row and column are never read
    check(shape(2, 5, 7, 10, 11, 3, 3), 2);           // stride 3: the scalar rows
    check(shape(2, 6, 4, 8, 12, 2, 3), 1);            // unequal strides
    check(shape(2, 4, 6, 6, 70, 2, 2), 2);            // rows of 35 outputs: full vectors and a masked tail
    check(shape(1, 16, 8, 16, 16, 2, 2), 3);          // batch 1: channel blocks on three threads
    check(shape(1, 16, 8, 8, 8, 2, 2), 3);            // the same under 64 points: dY packed
    check(shape(2, 3, 5, 4, 4, 2, 2), 4);             // more threads than rows of dW
}

TEST(ConvStrided1x1, AppliesOnlyToStridedUnpadded1x1) {
    ConvWeightGemmShape s = shape(2, 4, 4, 8, 8, 2, 2);
    EXPECT_TRUE(conv_strided_1x1_applies(s, true));
    EXPECT_FALSE(conv_strided_1x1_applies(s, false));  // 4x4 outputs: ConvWeightGemm's
    EXPECT_TRUE(conv_strided_1x1_applies(shape(2, 4, 4, 16, 16, 2, 2), false));
    ConvWeightGemmShape dense = shape(2, 4, 4, 8, 8, 1, 1);
    EXPECT_FALSE(conv_strided_1x1_applies(dense, true));
    ConvWeightGemmShape padded = s;
    padded.pad_t = 1;
    EXPECT_FALSE(conv_strided_1x1_applies(padded, true));
    ConvWeightGemmShape k3 = s;
    k3.kh = k3.kw = 3;
    EXPECT_FALSE(conv_strided_1x1_applies(k3, true));
    ConvWeightGemmShape past = s;  // a window on the right padding
    past.ow += 1;
    EXPECT_FALSE(conv_strided_1x1_applies(past, true));
}

}  // namespace
}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
