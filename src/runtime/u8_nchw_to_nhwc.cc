#include "runtime/u8_nchw_to_nhwc.h"

#include <immintrin.h>

#include <array>

#include "runtime/cpu_features.h"

namespace kiln::runtime {
namespace {

/// The indices that gather 64 output bytes [64 * part, 64 * part + 64) of three interleaved
/// planes: from a (plane 0) and b (plane 1) as vpermt2b's table (b's bytes at 64 + i), and from
/// c (plane 2) as vpermb's, with the mask of the bytes c supplies.
struct Part {
    alignas(64) std::array<uint8_t, 64> ab, c;
    __mmask64 c_mask = 0;
};

std::array<Part, 3> make_parts() {
    std::array<Part, 3> parts{};
    for (int part = 0; part < 3; ++part)
        for (int j = 0; j < 64; ++j) {
            const int o = part * 64 + j, pixel = o / 3, plane = o % 3;
            Part& p = parts[static_cast<size_t>(part)];
            p.ab[static_cast<size_t>(j)] = static_cast<uint8_t>(plane == 1 ? 64 + pixel : pixel);
            p.c[static_cast<size_t>(j)] = static_cast<uint8_t>(pixel);
            if (plane == 2) p.c_mask |= __mmask64{1} << j;
        }
    return parts;
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) int64_t interleave3_vbmi(const uint8_t* const* planes,
                                                                               int64_t pixels, uint8_t* out) {
    static const std::array<Part, 3> parts = make_parts();
    __m512i ab[3], c[3];
    for (int i = 0; i < 3; ++i) {
        ab[i] = _mm512_load_si512(parts[static_cast<size_t>(i)].ab.data());
        c[i] = _mm512_load_si512(parts[static_cast<size_t>(i)].c.data());
    }
    int64_t p = 0;
    for (; p + 64 <= pixels; p += 64) {
        const __m512i a = _mm512_loadu_si512(planes[0] + p), b = _mm512_loadu_si512(planes[1] + p);
        const __m512i cc = _mm512_loadu_si512(planes[2] + p);
        for (int i = 0; i < 3; ++i) {
            // Output part i covers pixels [64 i / 3, 64 (i + 1) / 3]: within the 64 loaded.
            __m512i v = _mm512_permutex2var_epi8(a, ab[i], b);
            v = _mm512_mask_permutexvar_epi8(v, parts[static_cast<size_t>(i)].c_mask, c[i], cc);
            _mm512_storeu_si512(out + 3 * p + 64 * i, v);
        }
    }
    return p;
}

bool has_vbmi() {
    static const bool yes = missing_cpu_features({"avx512f", "avx512bw", "avx512vbmi"}).empty();
    return yes;
}

}  // namespace

bool fast_interleave(int64_t channels) { return channels == 3 && has_vbmi(); }

void interleave_planes(const uint8_t* const* planes, int64_t channels, int64_t pixels, uint8_t* out) {
    int64_t p = fast_interleave(channels) ? interleave3_vbmi(planes, pixels, out) : 0;
    for (; p < pixels; ++p)
        for (int64_t c = 0; c < channels; ++c) out[p * channels + c] = planes[c][p];
}

}  // namespace kiln::runtime
