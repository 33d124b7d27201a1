// ConvWeightGemm (conv_weight_gemm.h): im2col + one sgemm per block of dW's rows.
// (sgemm 'N','N' ran a 256x4608x256 block at 109 GFLOP/s on one thread, 'N','T' at 49-79.)
#if KILN_HAVE_DNNL
#include "runtime/conv_weight_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <oneapi/dnnl/dnnl.h>

#include "runtime/executable.h"
#include "runtime/extern_parts.h"

namespace kiln::runtime {

bool conv_weight_gemm_preferred(const ConvWeightGemmShape& s) {
    if (const char* force = std::getenv("KILN_CONV_WGRAD")) {
        if (std::string(force) == "gemm") return true;
        if (std::string(force) == "dnnl") return false;
    }
    // ResNet-18 at batch 16, one A/B per shape (KILN_CONV_WGRAD), 2 threads: 512 channels on
    // 4x4 took 40-64 ms per 3 calls with oneDNN, 18-32 as a GEMM; 256 on 7x7 was even (20-24
    // both); the strided 1x1 convs (64->128 onto 14x14, 128->256 onto 7x7) 2.4-3.6 ms against
    // 0.9-3.0 (their im2col is a quarter of X). At 14x14 and up with 3x3 windows oneDNN's
    // kernel ran at 80-95 GFLOP/s on 2 threads and im2col would copy 9x X.
    // Below ~16 MFLOP the GEMM's two parallel passes cost more than they save: the digits CNN's
    // 8->16 channel 3x3 on 4x4 at batch 64 (2.4 MFLOP) took 0.07 ms against oneDNN's 0.04-0.05.
    const bool strided_1x1 = s.kh == 1 && s.kw == 1 && (s.stride_h > 1 || s.stride_w > 1);
    const double flops = 2.0 * s.m * s.c * s.kh * s.kw * s.n * s.oh * s.ow;
    return flops >= 16e6 && (s.oh * s.ow <= 36 || strided_1x1);
}

ConvWeightGemm::ConvWeightGemm(const ConvWeightGemmShape& s)
    : s_(s), rows_(s.c * s.kh * s.kw), cols_(s.n * s.oh * s.ow) {}

void ConvWeightGemm::im2col_rows(const float* x, float* col, int64_t p0, int64_t p1) const {
    // Row p = (n, oh, ow) holds the window at that output point, (c, kh, kw) along the row: rows
    // are written in order and an image's C*H*W floats (32 KB at 512x4x4) stay in cache.
    const int64_t plane = s_.oh * s_.ow, taps = s_.kh * s_.kw;
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t n = p / plane, oh = p % plane / s_.ow, ow = p % s_.ow;
        const float* xn = x + n * s_.c * s_.h * s_.w;
        float* out = col + p * rows_;
        for (int64_t kh = 0; kh < s_.kh; ++kh) {
            const int64_t ih = oh * s_.stride_h - s_.pad_t + kh * s_.dil_h;
            const bool row_in = ih >= 0 && ih < s_.crop_h;
            for (int64_t kw = 0; kw < s_.kw; ++kw) {
                const int64_t iw = ow * s_.stride_w - s_.pad_l + kw * s_.dil_w;
                float* o = out + kh * s_.kw + kw;
                if (!row_in || iw < 0 || iw >= s_.crop_w) {
                    for (int64_t c = 0; c < s_.c; ++c) o[c * taps] = 0.0f;
                    continue;
                }
                const float* xi = xn + ih * s_.w + iw;
                for (int64_t c = 0; c < s_.c; ++c) o[c * taps] = xi[c * s_.h * s_.w];
            }
        }
    }
}

void pack_dy_by_channel(const ConvWeightGemmShape& s, const float* dy, float* dyp, int64_t m0, int64_t m1) {
    const int64_t plane = s.oh * s.ow;
    for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = 0; n < s.n; ++n)
            std::memcpy(dyp + (m * s.n + n) * plane, dy + (n * s.m + m) * plane, static_cast<size_t>(plane) * sizeof(float));
}

std::vector<float>* ConvWeightGemm::take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
        all_.push_back(std::make_unique<std::vector<float>>(static_cast<size_t>((rows_ + s_.m) * cols_)));
        return all_.back().get();
    }
    std::vector<float>* b = free_.back();
    free_.pop_back();
    return b;
}

void ConvWeightGemm::give(std::vector<float>* b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
}

Status ConvWeightGemm::run(const float* x, const float* dy, float* dw, const kiln_kernel_env& env, int threads) {
    std::vector<float>* buf = take();
    float* col = buf->data();
    float* dyp = col + rows_ * cols_;
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, s_.m));
    auto block = [parts](int64_t total, int64_t i) { return std::pair{total * i / parts, total * (i + 1) / parts}; };
    Status st = run_extern_parts(env, parts, [&](int64_t i) {
        const auto [p0, p1] = block(cols_, i);
        im2col_rows(x, col, p0, p1);
        const auto [m0, m1] = block(s_.m, i);
        pack_dy_by_channel(s_, dy, dyp, m0, m1);
        return Status::ok_status();
    });
    if (st.ok() && !(env.stop && *env.stop)) {
        st = run_extern_parts(env, parts, [&](int64_t i) {
            const auto [m0, m1] = block(s_.m, i);
            if (m1 == m0) return Status::ok_status();
            omp_set_num_threads(1);  // this part is one of Kiln's threads
            const dnnl_status_t r = dnnl_sgemm('N', 'N', m1 - m0, rows_, cols_, 1.0f, dyp + m0 * cols_, cols_, col,
                                               rows_, 0.0f, dw + m0 * rows_, rows_);
            if (r != dnnl_success)
                return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
            return Status::ok_status();
        });
    }
    give(buf);
    if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
    return st;
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
