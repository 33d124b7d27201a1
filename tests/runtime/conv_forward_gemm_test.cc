// ConvForwardGemm (runtime/conv_forward_gemm.h), the forward convolution as transposed im2col +
// sgemm, against a direct float64 loop over the definition Y[n, m, oh, ow] = b[m] + sum_{c, kh,
// kw} W[m, c, kh, kw] * X[n, c, oh*s - pad + kh*d, ow*s - pad + kw*d] (zero outside the input):
// strides, dilations, asymmetric pads, 1x1, more threads than output channels, with and without
// a bias, and a second call reusing the buffers.
#if KILN_HAVE_DNNL
#include "runtime/conv_forward_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
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

std::vector<double> reference(const ConvWeightGemmShape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const float* bias) {
    std::vector<double> y(static_cast<size_t>(s.n * s.m * s.oh * s.ow), 0.0);
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t m = 0; m < s.m; ++m)
            for (int64_t oh = 0; oh < s.oh; ++oh)
                for (int64_t ow = 0; ow < s.ow; ++ow) {
                    double acc = bias ? bias[m] : 0.0;
                    for (int64_t c = 0; c < s.c; ++c)
                        for (int64_t kh = 0; kh < s.kh; ++kh)
                            for (int64_t kw = 0; kw < s.kw; ++kw) {
                                const int64_t ih = oh * s.stride_h - s.pad_t + kh * s.dil_h;
                                const int64_t iw = ow * s.stride_w - s.pad_l + kw * s.dil_w;
                                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                                acc += double(w[((m * s.c + c) * s.kh + kh) * s.kw + kw]) *
                                       x[((n * s.c + c) * s.h + ih) * s.w + iw];
                            }
                    y[((n * s.m + m) * s.oh + oh) * s.ow + ow] = acc;
                }
    return y;
}

void check(const ConvWeightGemmShape& s, int threads, bool with_bias) {
    SCOPED_TRACE("N" + std::to_string(s.n) + " C" + std::to_string(s.c) + " M" + std::to_string(s.m) + " " +
                 std::to_string(s.kh) + "x" + std::to_string(s.kw) + " threads " + std::to_string(threads) +
                 (with_bias ? " bias" : ""));
    const std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, 1);
    const std::vector<float> w = random_floats(s.m * s.c * s.kh * s.kw, 2);
    const std::vector<float> b = random_floats(s.m, 3);
    const std::vector<double> want = reference(s, x, w, with_bias ? b.data() : nullptr);
    ThreadPool pool(threads);
    ConvForwardGemm k(s);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the first one's buffers
        std::vector<float> y(want.size(), 123.0f);
        ASSERT_TRUE(k.run(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), pool.kernel_env(), threads).ok());
        for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(y[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "Y element " << i << " call " << call;
    }
}

TEST(ConvForwardGemm, MatchesTheDefinition) {
    // n, c, h, w, crop_h, crop_w (= h, w), m, kh, kw, oh, ow, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l
    check({3, 8, 6, 6, 6, 6, 16, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1}, 2, false);   // ResNet's 3x3, pad 1
    check({2, 5, 11, 9, 11, 9, 7, 3, 3, 6, 5, 2, 2, 1, 1, 1, 0}, 3, true);   // strided, asymmetric pads
    check({2, 4, 9, 9, 9, 9, 6, 3, 2, 5, 7, 1, 1, 2, 1, 2, 0}, 2, true);     // dilated rows
    check({2, 16, 8, 8, 8, 8, 32, 1, 1, 4, 4, 2, 2, 1, 1, 0, 0}, 3, false);  // 1x1 stride 2, last row unread
    check({2, 3, 7, 8, 7, 8, 2, 3, 3, 3, 3, 2, 3, 1, 1, 0, 0}, 3, true);     // M below the threads
    check({1, 1, 4, 4, 4, 4, 1, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1}, 1, false);    // one of everything
}

TEST(ConvForwardGemm, PrefersSmallPlanesOfEnoughWork) {
    // ResNet-18 at batch 16: 512 channels on 4x4 (the GEMM), 64 on 28x28 (oneDNN); the digits
    // CNN's 8->16 on 4x4 at batch 64 is below the 16 MFLOP floor.
    EXPECT_TRUE(conv_forward_gemm_preferred({16, 512, 4, 4, 4, 4, 512, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1}));
    EXPECT_FALSE(conv_forward_gemm_preferred({16, 64, 28, 28, 28, 28, 64, 3, 3, 28, 28, 1, 1, 1, 1, 1, 1}));
    EXPECT_FALSE(conv_forward_gemm_preferred({64, 8, 4, 4, 4, 4, 16, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
