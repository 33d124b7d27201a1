// kiln_softmax (softmax_kernel.h): rows of a last-axis Softmax, three passes over each row.
#include "runtime/softmax_kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/extern_parts.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

#define KILN_SOFTMAX_AVX512 __attribute__((target("avx512f")))

constexpr float kExpFloor = -87.0f;  // flushed_exp's clamp (op/defs/flush_subnormal.h)

// Cephes' expf: n = round(d log2 e), r = d - n ln2 (ln2 split in two), e^r by a degree-6
// polynomial, times 2^n. Valid for d in [-87, 0] (2^n stays normal); NaN gives NaN.
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

float exp_scalar(float d) {
    const float n = std::nearbyint(d * kLog2e);
    float r = d - n * kLn2Hi;
    r = r - n * kLn2Lo;
    float p = kP[0];
    for (int k = 1; k < 6; ++k) p = p * r + kP[k];
    p = p * (r * r) + (r + 1.0f);
    if (std::isnan(p)) return p;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

void softmax_row_scalar(const float* x, float* y, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
        nan |= std::isnan(x[i]);
        m = std::max(m, x[i]);
    }
    if (nan) m = std::numeric_limits<float>::quiet_NaN();
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - m;
        y[i] = d < kExpFloor ? 0.0f : exp_scalar(d);
        sum += y[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) {
        const float p = y[i] * inv;
        y[i] = p < FLT_MIN ? 0.0f : p;
    }
}

KILN_SOFTMAX_AVX512 __m512 exp_avx512(__m512 d) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(d, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), d);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kP[0]);
    for (int k = 1; k < 6; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[k]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    // 2^n from n's bits; for a NaN d, n's conversion is garbage but p is NaN, so is the product.
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/// exp(v - m), 0 where v - m is below the floor (max(floor, d) keeps a NaN d).
KILN_SOFTMAX_AVX512 __m512 flushed_exp_avx512(__m512 v, __m512 m) {
    const __m512 d = _mm512_sub_ps(v, m), floor = _mm512_set1_ps(kExpFloor);
    const __mmask16 under = _mm512_cmp_ps_mask(d, floor, _CMP_LT_OQ);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), exp_avx512(_mm512_max_ps(floor, d)));
}

/// e * (1 / s), 0 under FLT_MIN (a NaN stays). The reciprocal once per row: a division per
/// element (VDIVPS, ~16 cycles a vector) made the kernel compute-bound at 2x ONNX Runtime.
KILN_SOFTMAX_AVX512 __m512 flushed_quotient_avx512(__m512 e, __m512 inv) {
    const __m512 p = _mm512_mul_ps(e, inv);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~_mm512_cmp_ps_mask(p, _mm512_set1_ps(FLT_MIN), _CMP_LT_OQ)), p);
}

/// One row; `next` (the row after it, or null) is prefetched while this one computes, so that
/// its first pass finds it in cache rather than waiting on memory (that pass was 40% of the time).
KILN_SOFTMAX_AVX512 void softmax_row_avx512(const float* x, float* y, int64_t n, const float* next) {
    const int64_t full = n / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1u);
    // Pass 1: the maximum, and whether a NaN is present (MAXPS drops NaNs).
    __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __mmask16 nan = 0;
    for (int64_t i = 0; i < full; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        vmax = _mm512_max_ps(vmax, v);
    }
    if (tail) {
        const __m512 v = _mm512_maskz_loadu_ps(tail, x + full);
        nan |= _mm512_mask_cmp_ps_mask(tail, v, v, _CMP_UNORD_Q);
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, v);
    }
    const float m = nan ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(vmax);
    // Pass 2: the flushed exponentials, stored, and their sum.
    const __m512 vm = _mm512_set1_ps(m);
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
        if (next) _mm_prefetch(reinterpret_cast<const char*>(next + i), _MM_HINT_T0);
        const __m512 e = flushed_exp_avx512(_mm512_loadu_ps(x + i), vm);
        _mm512_storeu_ps(y + i, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    if (tail) {
        const __m512 e = _mm512_maskz_mov_ps(tail, flushed_exp_avx512(_mm512_maskz_loadu_ps(tail, x + full), vm));
        _mm512_mask_storeu_ps(y + full, tail, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    // Pass 3: the probabilities.
    const __m512 vs = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(y + i, flushed_quotient_avx512(_mm512_loadu_ps(y + i), vs));
    if (tail) _mm512_mask_storeu_ps(y + full, tail, flushed_quotient_avx512(_mm512_maskz_loadu_ps(tail, y + full), vs));
}

bool have_avx512() {
    static const bool ok = __builtin_cpu_supports("avx512f");
    return ok;
}

}  // namespace

void softmax_rows(const float* x, float* y, int64_t rows, int64_t len) {
    const bool wide = have_avx512();
    for (int64_t r = 0; r < rows; ++r) {
        if (wide) softmax_row_avx512(x + r * len, y + r * len, len, r + 1 < rows ? x + (r + 1) * len : nullptr);
        else softmax_row_scalar(x + r * len, y + r * len, len);
    }
}

namespace {

class RowSoftmax final : public ExternKernel {
public:
    RowSoftmax(const ExternParams& p, const std::vector<ExternArg>& args)
        : x_(p.integer("x")), y_(p.integer("y")), rows_(p.integer("rows")), len_(p.integer("len")) {
        auto arg = [&](int64_t i, const char* what) -> const ExternArg& {
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()), kInvalidModel)
                << "kiln_softmax: argument " << what << " = " << i << " out of range";
            return args[static_cast<size_t>(i)];
        };
        const ExternArg& x = arg(x_, "x");
        const ExternArg& y = arg(y_, "y");
        KILN_CHECK(rows_ >= 1 && len_ >= 1, kInvalidModel) << "kiln_softmax: rows and len must be positive";
        // Element counts only: X's buffer may be a view's source of another shape (an opset-11
        // Softmax coerced to 2-D reads [2, 12, 5] as [2, 60]).
        for (const ExternArg* a : {&x, &y})
            KILN_CHECK(a->dtype == DType::kFloat32 && shape_numel(a->shape) == rows_ * len_, kInvalidModel)
                << "kiln_softmax: argument " << shape_str(a->shape) << " must be float32 of " << rows_ << " rows of "
                << len_;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        const auto* x = static_cast<const float*>(args[x_]);
        auto* y = static_cast<float*>(args[y_]);
        // Bands of rows, a few per thread (parts of a preemptible run stay short).
        const int64_t parts = std::min<int64_t>(rows_, std::max(1, threads) * 4);
        return run_extern_parts(env, parts, [&](int64_t part) {
            const int64_t r0 = rows_ * part / parts, r1 = rows_ * (part + 1) / parts;
            softmax_rows(x + r0 * len_, y + r0 * len_, r1 - r0, len_);
            return Status::ok_status();
        });
    }

private:
    int64_t x_, y_, rows_, len_;
};

}  // namespace

std::unique_ptr<ExternKernel> make_softmax_kernel(const ExternParams& params, const std::vector<ExternArg>& args) {
    return std::make_unique<RowSoftmax>(params, args);
}

}  // namespace kiln::runtime
