// The float matrix transpose (see transpose_2d.h): 8x8 blocks in AVX2 registers, the edges plain.
//
// NOTE: the runtime is built for the baseline x86-64 ISA, so the AVX2 kernel has a target
// attribute and runs only where the CPU reports AVX2.
#include "runtime/transpose_2d.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_TRANSPOSE_X86 1
#else
#define KILN_TRANSPOSE_X86 0
#endif

namespace kiln::runtime {
namespace {

void plain(const float* src, int64_t rows, int64_t cols, float* dst, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
}

#if KILN_TRANSPOSE_X86
/// The 8x8 block at src (row stride cols) into dst (row stride rows). Rows i and i + 4 are loaded
/// into the two halves of one register (the inserts ride on the load ports), so two shuffle
/// stages finish the transpose, with no cross-lane permute.
__attribute__((target("avx2"))) inline void block8(const float* src, int64_t cols, float* dst, int64_t rows) {
    __m256 a[8], b[8];
    for (int i = 0; i < 4; ++i) {
        a[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + i * cols)),
                                    _mm_loadu_ps(src + (i + 4) * cols), 1);
        a[i + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + i * cols + 4)),
                                        _mm_loadu_ps(src + (i + 4) * cols + 4), 1);
    }
    // a[i] = rows i | i+4 of columns 0-3, a[i+4] = the same of columns 4-7.
    for (int h = 0; h < 8; h += 4) {
        b[h] = _mm256_unpacklo_ps(a[h], a[h + 1]);
        b[h + 1] = _mm256_unpackhi_ps(a[h], a[h + 1]);
        b[h + 2] = _mm256_unpacklo_ps(a[h + 2], a[h + 3]);
        b[h + 3] = _mm256_unpackhi_ps(a[h + 2], a[h + 3]);
        _mm256_storeu_ps(dst + (h + 0) * rows, _mm256_shuffle_ps(b[h], b[h + 2], 0x44));
        _mm256_storeu_ps(dst + (h + 1) * rows, _mm256_shuffle_ps(b[h], b[h + 2], 0xEE));
        _mm256_storeu_ps(dst + (h + 2) * rows, _mm256_shuffle_ps(b[h + 1], b[h + 3], 0x44));
        _mm256_storeu_ps(dst + (h + 3) * rows, _mm256_shuffle_ps(b[h + 1], b[h + 3], 0xEE));
    }
}

/// Blocks of 8 or 16 along the strided side, the shorter side's blocks outer. 16 fills whole
/// 64-byte lines of the strided rows at once, unless that stride is a multiple of 512 floats:
/// then 16 rows fall into two L1 sets (8 ways each) and thrash. Measured alone ([rows, cols]):
/// [128, 1024] 30 us, [1024, 128] 34, [64, 3999] 46 (52 in blocks of 8), [256, 500] 24 (35).
template <int64_t kWide>
__attribute__((target("avx2"))) void blocks(const float* src, int64_t rows, int64_t cols, float* dst) {
    const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    if (rows <= cols) {  // rows of src outer: its strided rows are read kWide at a time
        const int64_t rw = rows / kWide * kWide;
        for (int64_t r = 0; r < rw; r += kWide)
            for (int64_t c = 0; c < c8; c += 8)
                for (int64_t i = 0; i < kWide; i += 8)
                    block8(src + (r + i) * cols + c, cols, dst + c * rows + r + i, rows);
        for (int64_t r = rw; r < r8; r += 8)
            for (int64_t c = 0; c < c8; c += 8) block8(src + r * cols + c, cols, dst + c * rows + r, rows);
    } else {  // columns outer: dst's strided rows are written kWide at a time
        const int64_t cw = cols / kWide * kWide;
        for (int64_t c = 0; c < cw; c += kWide)
            for (int64_t r = 0; r < r8; r += 8)
                for (int64_t i = 0; i < kWide; i += 8)
                    block8(src + r * cols + c + i, cols, dst + (c + i) * rows + r, rows);
        for (int64_t c = cw; c < c8; c += 8)
            for (int64_t r = 0; r < r8; r += 8) block8(src + r * cols + c, cols, dst + c * rows + r, rows);
    }
    plain(src, rows, cols, dst, 0, r8, c8, cols);
    plain(src, rows, cols, dst, r8, rows, 0, cols);
}
#endif

}  // namespace

void transpose_2d(const float* src, int64_t rows, int64_t cols, float* dst) {
#if KILN_TRANSPOSE_X86
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) {
        const int64_t stride = rows <= cols ? cols : rows;  // of the rows read or written across
        if (stride % 512 == 0) blocks<8>(src, rows, cols, dst);
        else blocks<16>(src, rows, cols, dst);
        return;
    }
#endif
    plain(src, rows, cols, dst, 0, rows, 0, cols);
}

}  // namespace kiln::runtime
