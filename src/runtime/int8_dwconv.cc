#include "runtime/int8_dwconv.h"

#include <immintrin.h>

#include <algorithm>

#include "runtime/cpu_features.h"
#include "support/error.h"

#define KILN_DW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define KILN_DW_INLINE KILN_DW_TARGET __attribute__((always_inline)) inline

namespace kiln::runtime {
namespace {

constexpr int64_t kLanes = 16;  // channels per zmm (int32 lanes)

/// What a strip reads besides x: one channel block's constants and the row's geometry.
struct Block {
    const int32_t* w;      // k * k vectors of 16 int32
    __m512i bias, zp, yzp;
    __m512 scale, lo, hi;
    __mmask16 mask;        // the block's channels (< 16 in a last partial block)
    int64_t c, w_in, pl;   // x's channels (pixel stride), width, left pad
};

/// 16 channels of x at px (column iw), widened to int32 lanes; x_zp outside the row.
/// kMasked: a last block of fewer than 16 channels (a full 16-byte load could run past x's end).
template <bool kEdge, bool kMasked>
KILN_DW_INLINE __m512i load_pixel(const Block& b, const uint8_t* px, int64_t iw) {
    if (kEdge && (iw < 0 || iw >= b.w_in)) return b.zp;
    if (kMasked) return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(b.mask, px));
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px)));
}

/// (Fully unrolled, so that acc stays in registers: the library builds at -O2.)
/// Output pixels [ow0, ow0 + kT) of one row and channel block: accumulate the window over the
/// k input rows, then requantize and store. kEdge: some columns read fall outside x (read as
/// x_zp), and only the first `valid` pixels are stored (a row's last strip may pass its end).
template <int kK, int kS, int kT, bool kEdge, bool kMasked>
KILN_DW_INLINE void strip(const Block& b, const uint8_t* const* rows, int64_t ow0, uint8_t* out, int64_t valid = kT) {
    __m512i acc[kT];
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) acc[t] = b.bias;
    __m512i wv[kK * kK];  // the window's weights in registers (as memory operands they doubled the loads)
#pragma GCC unroll 25
    for (int i = 0; i < kK * kK; ++i) wv[i] = _mm512_loadu_si512(b.w + i * kLanes);
    const int64_t iw0 = ow0 * kS - b.pl;
    constexpr int kCols = (kT - 1) * kS + kK;  // input columns the strip reads
#pragma GCC unroll 5
    for (int kh = 0; kh < kK; ++kh) {
        const uint8_t* px = rows[kh] + iw0 * b.c;  // column iw0 + j: one add a column, not
#pragma GCC unroll 32                            // kCols offsets kept live (they spilled)
        for (int j = 0; j < kCols; ++j, px += b.c) {
            const __m512i x = load_pixel<kEdge, kMasked>(b, px, iw0 + j);
#pragma GCC unroll 5
            for (int kw = 0; kw < kK; ++kw) {
                const int d = j - kw;
                if (d < 0 || d % kS != 0 || d / kS >= kT) continue;
                acc[d / kS] = _mm512_dpbusd_epi32(acc[d / kS], x, wv[kh * kK + kw]);
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) {
        if (kEdge && t >= valid) break;  // a row's last strip: pixels past its end not stored
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[t]), b.scale);
        f = _mm512_min_ps(_mm512_max_ps(f, b.lo), b.hi);
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), b.yzp);  // nearest even (MXCSR default)
        __m128i bytes = _mm512_cvtepi32_epi8(q);
        // In a register, then stored: GCC would fuse them into vpmovdb to memory, several
        // times slower on this host (AMD Zen 5) than vpmovdb + a store.
        __asm__("" : "+v"(bytes));
        if (kMasked) _mm_mask_storeu_epi8(out + (ow0 + t) * b.c, b.mask, bytes);
        else _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (ow0 + t) * b.c), bytes);
    }
}

/// kT pixels from column o on: the checked strip where its window leaves x's columns.
template <int kK, int kS, int kT, bool kMasked>
KILN_DW_INLINE void strip_at(const Block& b, const uint8_t* const* rows, int64_t o, int64_t first_in, int64_t last_in,
                             uint8_t* out) {
    if (o < first_in || o + kT - 1 > last_in) strip<kK, kS, kT, true, kMasked>(b, rows, o, out);
    else strip<kK, kS, kT, false, kMasked>(b, rows, o, out);
}

/// One output row of one channel block: strips of 8, the rest one strip of 8 or 4 whose pixels
/// past the row's end are computed but not stored (on narrow rows, 7 or 14 pixels, strips of
/// 4 + 2 + 1 took longer); a strip whose window reads outside the row's columns checks each
/// column. A partial last block (kMasked) runs pixel by pixel.
template <int kK, int kS, bool kMasked>
KILN_DW_INLINE void row_block(const Block& b, const uint8_t* const* rows, int64_t ow, uint8_t* out) {
    // Output columns whose window lies inside x: first_in <= o <= last_in.
    const int64_t first_in = (b.pl + kS - 1) / kS;
    const int64_t span = b.w_in - kK + b.pl;  // may be negative: floor division
    const int64_t last_in = span >= 0 ? span / kS : -((-span + kS - 1) / kS);
    if (kMasked) {
        for (int64_t o = 0; o < ow; ++o) strip_at<kK, kS, 1, true>(b, rows, o, first_in, last_in, out);
        return;
    }
    int64_t o = 0;
    for (; o + 8 <= ow; o += 8) strip_at<kK, kS, 8, false>(b, rows, o, first_in, last_in, out);
    if (ow - o > 4) strip<kK, kS, 8, true, false>(b, rows, o, out, ow - o);
    else if (o < ow) strip<kK, kS, 4, true, false>(b, rows, o, out, ow - o);
}

struct Plan {
    const Int8DwShape* s;
    const int32_t *weights, *bias;
    const float* scales;
    const uint8_t* pad_row;
    int64_t blocks;
    int32_t x_zp, y_zp;
    float lo, hi;
};

template <int kK, int kS>
KILN_DW_TARGET void run_tasks(const Plan& p, const uint8_t* x, uint8_t* y, int64_t t0, int64_t t1) {
    const Int8DwShape& s = *p.s;
    Block b;
    b.zp = _mm512_set1_epi32(p.x_zp);
    b.yzp = _mm512_set1_epi32(p.y_zp);
    b.lo = _mm512_set1_ps(p.lo);
    b.hi = _mm512_set1_ps(p.hi);
    b.c = s.c, b.w_in = s.w, b.pl = s.pad_left;
    for (int64_t task = t0; task < t1;) {
        const int64_t r = task / p.blocks, img = r / s.oh, orow = r % s.oh;
        const uint8_t* rows[kK];
        for (int kh = 0; kh < kK; ++kh) {
            const int64_t ih = orow * kS - s.pad_top + kh;
            rows[kh] = ih >= 0 && ih < s.h ? x + (img * s.h + ih) * s.w * s.c : p.pad_row;
        }
        uint8_t* out = y + (img * s.oh + orow) * s.ow * s.c;
        const int64_t cb_end = std::min(p.blocks, task - r * p.blocks + (t1 - task));
        for (int64_t cb = task - r * p.blocks; cb < cb_end; ++cb, ++task) {
            const int64_t c0 = cb * kLanes;
            b.w = p.weights + cb * kK * kK * kLanes;
            b.bias = _mm512_loadu_si512(p.bias + c0);
            b.scale = _mm512_loadu_ps(p.scales + c0);
            b.mask = static_cast<__mmask16>(s.c - c0 >= kLanes ? 0xFFFF : (1u << (s.c - c0)) - 1);
            const uint8_t* block_rows[kK];
            for (int kh = 0; kh < kK; ++kh) block_rows[kh] = rows[kh] + c0;
            if (s.c - c0 >= kLanes) row_block<kK, kS, false>(b, block_rows, s.ow, out + c0);
            else row_block<kK, kS, true>(b, block_rows, s.ow, out + c0);
        }
    }
}

}  // namespace

bool Int8DwConv::available() {
    static const bool yes = missing_cpu_features({"avx512f", "avx512bw", "avx512vl", "avx512vnni"}).empty();
    return yes;
}

bool Int8DwConv::handles(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt,
                         int64_t pl) {
    return kh == kw && (kh == 3 || kh == 5) && sh == sw && (sh == 1 || sh == 2) && dh == 1 && dw == 1 && pt >= 0 &&
           pl >= 0 && pt < kh && pl < kw;
}

Int8DwConv::Int8DwConv(const Int8DwShape& shape, const int8_t* w, const int32_t* bias,
                       const std::vector<float>& scales, int32_t x_zp, int32_t y_zp, bool y_signed)
    : s_(shape) {
    KILN_CHECK(handles(s_.k, s_.k, s_.stride, s_.stride, 1, 1, s_.pad_top, s_.pad_left) && s_.c > 0 && s_.n > 0 && x_zp >= 0 && x_zp <= 255 &&
                   s_.oh > 0 && s_.ow > 0 && (s_.oh - 1) * s_.stride - s_.pad_top < s_.h &&
                   (s_.ow - 1) * s_.stride - s_.pad_left < s_.w && static_cast<int64_t>(scales.size()) == s_.c,
               kInvalidModel)
        << "int8 depthwise conv: a " << s_.k << "x" << s_.k << " window at stride " << s_.stride << " over "
        << s_.h << "x" << s_.w << " into " << s_.oh << "x" << s_.ow << " with " << scales.size() << " scales for "
        << s_.c << " channels is not one it runs";
    const int64_t taps = s_.k * s_.k;
    blocks_ = (s_.c + kLanes - 1) / kLanes;
    x_zp_ = x_zp;
    y_zp_ = y_zp;
    lo_ = static_cast<float>((y_signed ? -128 : 0) - y_zp);
    hi_ = static_cast<float>((y_signed ? 127 : 255) - y_zp);
    weights_.assign(static_cast<size_t>(blocks_ * taps * kLanes), 0);
    bias_.assign(static_cast<size_t>(blocks_ * kLanes), 0);
    scales_.assign(static_cast<size_t>(blocks_ * kLanes), 0.f);
    for (int64_t c = 0; c < s_.c; ++c) {
        int32_t sum = 0;
        for (int64_t t = 0; t < taps; ++t) {
            const int8_t v = w[c * taps + t];
            weights_[static_cast<size_t>(((c / kLanes) * taps + t) * kLanes + c % kLanes)] = v;
            sum += v;
        }
        bias_[static_cast<size_t>(c)] = (bias ? bias[c] : 0) - x_zp_ * sum;
        scales_[static_cast<size_t>(c)] = scales[static_cast<size_t>(c)];
    }
    pad_row_.assign(static_cast<size_t>(s_.w * s_.c), static_cast<uint8_t>(x_zp));
}

void Int8DwConv::run(const uint8_t* x, uint8_t* y, int64_t t0, int64_t t1) const {
    const Plan p{&s_, weights_.data(), bias_.data(), scales_.data(), pad_row_.data(), blocks_, x_zp_, y_zp_, lo_,
                 hi_};
    t1 = std::min(t1, tasks());
    if (s_.k == 3 && s_.stride == 1) run_tasks<3, 1>(p, x, y, t0, t1);
    else if (s_.k == 3) run_tasks<3, 2>(p, x, y, t0, t1);
    else if (s_.stride == 1) run_tasks<5, 1>(p, x, y, t0, t1);
    else run_tasks<5, 2>(p, x, y, t0, t1);
}

}  // namespace kiln::runtime
