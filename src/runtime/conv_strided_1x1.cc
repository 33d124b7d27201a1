// ConvStrided1x1 (conv_strided_1x1.h): per-image sgemm calls around strided gathers / scatters.
#if KILN_HAVE_DNNL
#include "runtime/conv_strided_1x1.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <oneapi/dnnl/dnnl.h>

#include "runtime/dnnl_scratch_pool.h"
#include "runtime/executable.h"
#include "runtime/extern_parts.h"

namespace kiln::runtime {
namespace {

#define KILN_S1X1_AVX512 __attribute__((target("avx512f")))

bool have_avx512() {
    static const bool ok = __builtin_cpu_supports("avx512f");
    return ok;
}

/// d[i] = s[2i] for i < n: 16 outputs per permute of two loaded vectors (masked at the end).
KILN_S1X1_AVX512 void pick_even_avx512(float* d, const float* s, int64_t n) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        // The last block leaves out s[2n - 1]: past the row's last read pixel (maybe the buffer's end).
        const __m512 lo = _mm512_loadu_ps(s + 2 * i);
        const __m512 hi = i + 16 < n ? _mm512_loadu_ps(s + 2 * i + 16) : _mm512_maskz_loadu_ps(0x7fff, s + 2 * i + 16);
        _mm512_storeu_ps(d + i, _mm512_permutex2var_ps(lo, even, hi));
    }
    if (i < n) {
        const int64_t read = 2 * (n - i) - 1;  // s[2i .. 2n-2]
        const __mmask16 m0 = read >= 16 ? 0xffff : static_cast<__mmask16>((1u << read) - 1);
        const __mmask16 m1 = read > 16 ? static_cast<__mmask16>((1u << (read - 16)) - 1) : 0;
        const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, s + 2 * i), even,
                                                _mm512_maskz_loadu_ps(m1, s + 2 * i + 16));
        _mm512_mask_storeu_ps(d + i, static_cast<__mmask16>((1u << (n - i)) - 1), v);
    }
}

/// r[2i] = s[i], r[2i + 1] = 0 for i < n (2n floats written).
KILN_S1X1_AVX512 void spread_even_avx512(float* r, const float* s, int64_t n) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512 z = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(s + i);
        _mm512_storeu_ps(r + 2 * i, _mm512_permutex2var_ps(v, lo, z));
        _mm512_storeu_ps(r + 2 * i + 16, _mm512_permutex2var_ps(v, hi, z));
    }
    if (i < n) {
        const int64_t out = 2 * (n - i);
        const __mmask16 m0 = out >= 16 ? 0xffff : static_cast<__mmask16>((1u << out) - 1);
        const __mmask16 m1 = out > 16 ? static_cast<__mmask16>((1u << (out - 16)) - 1) : 0;
        const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - i)) - 1), s + i);
        _mm512_mask_storeu_ps(r + 2 * i, m0, _mm512_permutex2var_ps(v, lo, z));
        _mm512_mask_storeu_ps(r + 2 * i + 16, m1, _mm512_permutex2var_ps(v, hi, z));
    }
}

/// d[i] = s[i * stride], i < n.
void gather_row(float* d, const float* s, int64_t n, int64_t stride) {
    if (stride == 2 && have_avx512()) return pick_even_avx512(d, s, n);
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * stride];
}

/// r[i * stride] = s[i] for i < n, every other r[j] of [0, width) zero.
void scatter_row(float* r, const float* s, int64_t n, int64_t stride, int64_t width) {
    if (stride != 2 || !have_avx512()) {
        std::memset(r, 0, static_cast<size_t>(width) * sizeof(float));
        for (int64_t i = 0; i < n; ++i) r[i * stride] = s[i];
        return;
    }
    const int64_t pairs = std::min(n, width / 2);  // (value, 0) pairs inside the row
    spread_even_avx512(r, s, pairs);
    int64_t done = 2 * pairs;
    if (pairs < n) r[done++] = s[pairs];  // an odd width's last column: its zero would fall past the row
    if (width > done) std::memset(r + done, 0, static_cast<size_t>(width - done) * sizeof(float));
}

dnnl::memory::desc floats(int64_t n) {
    return dnnl::memory::desc({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
}

Status sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float beta, float* c, int64_t ldc) {
    const dnnl_status_t r = dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    if (r != dnnl_success) return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
    return Status::ok_status();
}

std::pair<int64_t, int64_t> block(int64_t total, int64_t parts, int64_t i) {
    return {total * i / parts, total * (i + 1) / parts};
}

/// Below this many output points per image one sgemm per image is mostly its own overhead
/// (ResNet-18's 4x4 planes: 92 against 169 GFLOP/s on one thread): the data gradient packs dY
/// first and one sgemm spans the batch; the weight gradient is left to ConvWeightGemm.
constexpr int64_t kPackedBelow = 64;

}  // namespace

bool conv_strided_1x1_applies(const ConvWeightGemmShape& s, bool data) {
    if (const char* force = std::getenv("KILN_CONV_BWD_1X1"); force && std::string(force) == "dnnl") return false;
    // Weight gradients of smaller planes: ConvWeightGemm's one sgemm over the whole batch was as
    // fast or faster in ResNet-18's step (0.63-0.69 against 0.71-0.80 ms at 7x7 and 4x4).
    if (!data && s.oh * s.ow < kPackedBelow) return false;
    return s.kh == 1 && s.kw == 1 && (s.stride_h > 1 || s.stride_w > 1) && s.pad_t == 0 && s.pad_l == 0 &&
           s.oh >= 1 && s.ow >= 1 && (s.oh - 1) * s.stride_h < s.crop_h && (s.ow - 1) * s.stride_w < s.crop_w;
}

/// Channel c of image n of dX, every row, from that channel's OH x OW values at tmp_c.
void ConvStrided1x1::spread_channel(const float* tmp_c, int64_t n, int64_t c, float* dx) const {
    float* img = dx + (n * s_.c + c) * s_.h * s_.w;
    for (int64_t h = 0; h < s_.h; ++h) {
        float* row = img + h * s_.w;
        const int64_t oh = h / s_.stride_h;
        if (h % s_.stride_h != 0 || oh >= s_.oh)
            std::memset(row, 0, static_cast<size_t>(s_.w) * sizeof(float));
        else
            scatter_row(row, tmp_c + oh * s_.ow, s_.ow, s_.stride_w, s_.w);
    }
}

Status ConvStrided1x1::run_data(const float* dy, const float* w, float* dx, const kiln_kernel_env& env,
                                int threads) const {
    const int64_t plane = s_.oh * s_.ow;
    if (plane < kPackedBelow) return run_data_packed(dy, w, dx, env, threads);
    // Batch 1 on two threads still splits: each image's channels in `cblocks` blocks.
    const int64_t cblocks = std::min<int64_t>(s_.c, std::max<int64_t>(1, (threads + s_.n - 1) / s_.n));
    const int64_t units = s_.n * cblocks, parts = std::max<int64_t>(1, std::min<int64_t>(threads, units));
    const int64_t cmax = (s_.c + cblocks - 1) / cblocks;
    Status st = run_extern_parts(env, parts, [&](int64_t i) {
        ScratchLease tmp_lease(floats(cmax * plane));
        float* tmp = static_cast<float*>(tmp_lease.get().get_data_handle());
        omp_set_num_threads(1);  // this part is one of Kiln's threads
        const auto [u0, u1] = block(units, parts, i);
        for (int64_t u = u0; u < u1; ++u) {
            if (env.stop && *env.stop) break;
            const int64_t n = u / cblocks;
            const auto [c0, c1] = block(s_.c, cblocks, u % cblocks);
            // tmp[c - c0, p] = sum_m W[m, c] dY[n, m, p]
            Status g = sgemm('T', 'N', c1 - c0, plane, s_.m, w + c0, s_.c, dy + n * s_.m * plane, plane, 0.0f, tmp, plane);
            if (!g.ok()) return g;
            for (int64_t c = c0; c < c1; ++c) spread_channel(tmp + (c - c0) * plane, n, c, dx);
        }
        return Status::ok_status();
    });
    if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
    return st;
}

Status ConvStrided1x1::run_data_packed(const float* dy, const float* w, float* dx, const kiln_kernel_env& env,
                                       int threads) const {
    const int64_t plane = s_.oh * s_.ow, depth = s_.n * plane;
    ScratchLease lease(floats((s_.m + s_.c) * depth));
    float* dyp = static_cast<float*>(lease.get().get_data_handle());  // [M, N * P]
    float* tmp = dyp + s_.m * depth;                                   // W^T . dYp: [C, N * P]
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, std::min(s_.m, s_.c)));
    Status st = run_extern_parts(env, parts, [&](int64_t i) {
        const auto [m0, m1] = block(s_.m, parts, i);
        pack_dy_by_channel(s_, dy, dyp, m0, m1);
        return Status::ok_status();
    });
    if (st.ok() && !(env.stop && *env.stop))
        st = run_extern_parts(env, parts, [&](int64_t i) {
            const auto [c0, c1] = block(s_.c, parts, i);
            omp_set_num_threads(1);
            Status g = sgemm('T', 'N', c1 - c0, depth, s_.m, w + c0, s_.c, dyp, depth, 0.0f, tmp + c0 * depth, depth);
            if (!g.ok()) return g;
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t n = 0; n < s_.n; ++n) spread_channel(tmp + c * depth + n * plane, n, c, dx);
            return Status::ok_status();
        });
    if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
    return st;
}

Status ConvStrided1x1::run_weights(const float* x, const float* dy, float* dw, const kiln_kernel_env& env,
                                   int threads) const {
    const int64_t plane = s_.oh * s_.ow, depth = s_.n * plane;
    ScratchLease xs_lease(floats(s_.c * depth));
    float* xs = static_cast<float*>(xs_lease.get().get_data_handle());  // Xs as [C, N * OH * OW]
    const int64_t pack_parts = std::max<int64_t>(1, std::min<int64_t>(threads, s_.n * s_.c));
    Status st = run_extern_parts(env, pack_parts, [&](int64_t i) {
        const auto [r0, r1] = block(s_.n * s_.c, pack_parts, i);
        for (int64_t r = r0; r < r1; ++r) {  // r = (n, c)
            const int64_t n = r / s_.c, c = r % s_.c;
            const float* img = x + r * s_.h * s_.w;
            float* out = xs + c * depth + n * plane;
            for (int64_t oh = 0; oh < s_.oh; ++oh)
                gather_row(out + oh * s_.ow, img + oh * s_.stride_h * s_.w, s_.ow, s_.stride_w);
        }
        return Status::ok_status();
    });
    if (st.ok() && !(env.stop && *env.stop)) {
        const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, s_.m));
        st = run_extern_parts(env, parts, [&](int64_t i) {
            const auto [m0, m1] = block(s_.m, parts, i);
            if (m1 == m0) return Status::ok_status();
            omp_set_num_threads(1);
            // dW[m0:m1, :] = sum_n dY_n[m0:m1, :] . Xs_n^T; dY_n's rows are its planes, no packing.
            for (int64_t n = 0; n < s_.n; ++n) {
                Status g = sgemm('N', 'T', m1 - m0, s_.c, plane, dy + (n * s_.m + m0) * plane, plane, xs + n * plane,
                                 depth, n == 0 ? 0.0f : 1.0f, dw + m0 * s_.c, s_.c);
                if (!g.ok()) return g;
            }
            return Status::ok_status();
        });
    }
    if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
    return st;
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
