// ConvWeightGemm (runtime/conv_weight_gemm.h), the weight gradient as im2col + sgemm, against
// a direct float64 loop over the definition dW[m, c, kh, kw] = sum_{n, oh, ow} dY[n, m, oh, ow]
// * X[n, c, oh*s - pad + kh*d, ow*s - pad + kw*d] (zero outside the read extents): strides,
// dilations, asymmetric pads, a crop that leaves the last rows unread, 1x1, more threads than
// output channels, and a second call reusing the buffers.
#if KILN_HAVE_DNNL
#include "runtime/conv_weight_gemm.h"

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

std::vector<double> reference(const ConvWeightGemmShape& s, const std::vector<float>& x, const std::vector<float>& dy) {
    std::vector<double> dw(static_cast<size_t>(s.m * s.c * s.kh * s.kw), 0.0);
    for (int64_t m = 0; m < s.m; ++m)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t kh = 0; kh < s.kh; ++kh)
                for (int64_t kw = 0; kw < s.kw; ++kw) {
                    double acc = 0;
                    for (int64_t n = 0; n < s.n; ++n)
                        for (int64_t oh = 0; oh < s.oh; ++oh)
                            for (int64_t ow = 0; ow < s.ow; ++ow) {
                                const int64_t ih = oh * s.stride_h - s.pad_t + kh * s.dil_h;
                                const int64_t iw = ow * s.stride_w - s.pad_l + kw * s.dil_w;
                                if (ih < 0 || ih >= s.crop_h || iw < 0 || iw >= s.crop_w) continue;
                                acc += double(dy[((n * s.m + m) * s.oh + oh) * s.ow + ow]) *
                                       x[((n * s.c + c) * s.h + ih) * s.w + iw];
                            }
                    dw[((m * s.c + c) * s.kh + kh) * s.kw + kw] = acc;
                }
    return dw;
}

void check(const ConvWeightGemmShape& s, int threads) {
    SCOPED_TRACE("N" + std::to_string(s.n) + " C" + std::to_string(s.c) + " M" + std::to_string(s.m) + " " +
                 std::to_string(s.kh) + "x" + std::to_string(s.kw) + " threads " + std::to_string(threads));
    const std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, 1);
    const std::vector<float> dy = random_floats(s.n * s.m * s.oh * s.ow, 2);
    const std::vector<double> want = reference(s, x, dy);
    ThreadPool pool(threads);
    ConvWeightGemm k(s);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the first one's buffers
        std::vector<float> dw(want.size(), 123.0f);
        ASSERT_TRUE(k.run(x.data(), dy.data(), dw.data(), pool.kernel_env(), threads).ok());
        for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(dw[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "dW element " << i << " call " << call;
    }
}

TEST(ConvWeightGemm, MatchesTheDefinition) {
    // n, c, h, w, crop_h, crop_w, m, kh, kw, oh, ow, stride_h, stride_w, dil_h, dil_w, pad_t, pad_l
    check({3, 8, 6, 6, 6, 6, 16, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1}, 2);       // ResNet's 3x3, pad 1
    check({2, 5, 11, 9, 11, 9, 7, 3, 3, 6, 5, 2, 2, 1, 1, 1, 0}, 3);      // strided, asymmetric pads
    check({2, 4, 9, 9, 9, 9, 6, 3, 2, 5, 7, 1, 1, 2, 1, 2, 0}, 2);        // dilated rows
    check({2, 16, 8, 8, 7, 7, 32, 1, 1, 4, 4, 2, 2, 1, 1, 0, 0}, 3);      // 1x1 stride 2, last row unread
    check({2, 3, 7, 8, 5, 8, 2, 3, 3, 2, 2, 2, 3, 1, 1, 0, 0}, 3);        // crop, M below the threads
    check({1, 1, 4, 4, 4, 4, 1, 3, 3, 4, 4, 1, 1, 1, 1, 1, 1}, 1);        // one of everything
}

}  // namespace
}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
