// ConvForwardGemm (conv_forward_gemm.h): transposed im2col + one sgemm per block of W's rows.
#if KILN_HAVE_DNNL
#include "runtime/conv_forward_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <oneapi/dnnl/dnnl.h>

#include "runtime/executable.h"
#include "runtime/extern_parts.h"

namespace kiln::runtime {

bool conv_forward_gemm_preferred(const ConvWeightGemmShape& s) {
    if (const char* force = std::getenv("KILN_CONV_FWD")) {
        if (std::string(force) == "gemm") return true;
        if (std::string(force) == "dnnl") return false;
    }
    // ResNet-18 at batch 16, 2 threads: the three 512-channel 3x3 convs on 4x4 took 30.8 ms per
    // step with oneDNN (118 GFLOP/s), the strided 256->512 one 4.3 ms (142 GFLOP/s); the 7x7
    // and larger planes ran at 200-215 GFLOP/s there and im2col would copy 9x X.
    const double flops = 2.0 * s.m * s.c * s.kh * s.kw * s.n * s.oh * s.ow;
    return flops >= 16e6 && s.oh * s.ow <= 36;
}

ConvForwardGemm::ConvForwardGemm(const ConvWeightGemmShape& s)
    : s_(s), depth_(s.c * s.kh * s.kw), cols_(s.n * s.oh * s.ow) {}

void ConvForwardGemm::im2col_t_rows(const float* x, float* col_t, int64_t r0, int64_t r1) const {
    // Row r = (c, kh, kw) holds that tap of every window, (n, oh, ow) along the row.
    const int64_t plane = s_.oh * s_.ow, taps = s_.kh * s_.kw;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t c = r / taps, kh = r % taps / s_.kw, kw = r % s_.kw;
        float* out = col_t + r * cols_;
        for (int64_t n = 0; n < s_.n; ++n) {
            const float* xc = x + (n * s_.c + c) * s_.h * s_.w;
            for (int64_t oh = 0; oh < s_.oh; ++oh) {
                const int64_t ih = oh * s_.stride_h - s_.pad_t + kh * s_.dil_h;
                float* o = out + n * plane + oh * s_.ow;
                if (ih < 0 || ih >= s_.crop_h) {
                    std::memset(o, 0, static_cast<size_t>(s_.ow) * sizeof(float));
                    continue;
                }
                const float* xr = xc + ih * s_.w;
                for (int64_t ow = 0; ow < s_.ow; ++ow) {
                    const int64_t iw = ow * s_.stride_w - s_.pad_l + kw * s_.dil_w;
                    o[ow] = iw >= 0 && iw < s_.crop_w ? xr[iw] : 0.0f;
                }
            }
        }
    }
}

std::vector<float>* ConvForwardGemm::take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
        all_.push_back(std::make_unique<std::vector<float>>(static_cast<size_t>((depth_ + s_.m) * cols_)));
        return all_.back().get();
    }
    std::vector<float>* b = free_.back();
    free_.pop_back();
    return b;
}

void ConvForwardGemm::give(std::vector<float>* b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
}

Status ConvForwardGemm::run(const float* x, const float* w, const float* bias, float* y, const kiln_kernel_env& env,
                            int threads) {
    std::vector<float>* buf = take();
    float* col_t = buf->data();
    float* yt = col_t + depth_ * cols_;
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, s_.m));
    auto block = [parts](int64_t total, int64_t i) { return std::pair{total * i / parts, total * (i + 1) / parts}; };
    Status st = run_extern_parts(env, parts, [&](int64_t i) {
        const auto [r0, r1] = block(depth_, i);
        im2col_t_rows(x, col_t, r0, r1);
        return Status::ok_status();
    });
    const int64_t plane = s_.oh * s_.ow;
    if (st.ok() && !(env.stop && *env.stop)) {
        st = run_extern_parts(env, parts, [&](int64_t i) {
            const auto [m0, m1] = block(s_.m, i);
            if (m1 == m0) return Status::ok_status();
            omp_set_num_threads(1);  // this part is one of Kiln's threads
            const dnnl_status_t r = dnnl_sgemm('N', 'N', m1 - m0, cols_, depth_, 1.0f, w + m0 * depth_, depth_, col_t,
                                               cols_, 0.0f, yt + m0 * cols_, cols_);
            if (r != dnnl_success)
                return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
            for (int64_t m = m0; m < m1; ++m) {
                const float b = bias ? bias[m] : 0.0f;
                for (int64_t n = 0; n < s_.n; ++n) {
                    const float* from = yt + m * cols_ + n * plane;
                    float* to = y + (n * s_.m + m) * plane;
                    for (int64_t p = 0; p < plane; ++p) to[p] = from[p] + b;
                }
            }
            return Status::ok_status();
        });
    }
    give(buf);
    if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
    return st;
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
