// The packed batch-1 recurrent GEMV (see rnn_gemv.h).
//
// NOTE: the runtime is built for the baseline x86-64 ISA, so the kernel is compiled for AVX2 + FMA
// through a target attribute and only called where supported() says the CPU has both.
#include "runtime/rnn_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_GEMV_X86 1
#else
#define KILN_GEMV_X86 0
#endif

namespace kiln::runtime::rnn {

PackedGemv::PackedGemv(const float* r, int64_t H, int64_t K, int64_t q0, int64_t nq, int64_t j0, int64_t hp)
    : k_(K), nq_(nq), hp_(hp) {
    KILN_CHECK(nq >= 1 && nq <= 4 && hp > 0 && K > 0, kInternal)
        << "bug in Kiln: PackedGemv nq " << nq << ", hp " << hp << ", K " << K;
    const int64_t blocks = (hp + 7) / 8;
    w_.assign(static_cast<size_t>(blocks * K * nq * 8), 0.0f);
    for (int64_t u = 0; u < blocks; ++u)
        for (int64_t q = 0; q < nq; ++q)
            for (int64_t l = 0; l < 8 && u * 8 + l < hp; ++l) {
                const float* row = r + ((q0 + q) * H + j0 + u * 8 + l) * K;
                float* out = w_.data() + (u * K * nq + q) * 8 + l;
                for (int64_t k = 0; k < K; ++k) out[k * nq * 8] = row[k];
            }
    set_avx512(true);
}

#if KILN_GEMV_X86
namespace {

/// One block of 8 units: NQ gates, K unrolled by two into separate accumulators (an FMA's
/// latency is four cycles; one chain per gate would stall on it).
template <int NQ>
__attribute__((target("avx2,fma"))) void block(const float* w, const float* h, int64_t K, float* out, int64_t stride) {
    __m256 a[NQ], b[NQ];  // NOTE: the unroll pragmas keep these in registers
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) a[q] = b[q] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= K; k += 2, w += 2 * NQ * 8) {
        const __m256 h0 = _mm256_broadcast_ss(h + k), h1 = _mm256_broadcast_ss(h + k + 1);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; ++q) a[q] = _mm256_fmadd_ps(h0, _mm256_loadu_ps(w + q * 8), a[q]);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; ++q) b[q] = _mm256_fmadd_ps(h1, _mm256_loadu_ps(w + (NQ + q) * 8), b[q]);
    }
    if (k < K) {
        const __m256 h0 = _mm256_broadcast_ss(h + k);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; ++q) a[q] = _mm256_fmadd_ps(h0, _mm256_loadu_ps(w + q * 8), a[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) _mm256_storeu_ps(out + q * stride, _mm256_add_ps(a[q], b[q]));
}

/// block<NQ> for NQ = 2 or 4 with AVX-512: register p holds gates 2p and 2p + 1 of the block's
/// 8 units, one aligned 64-byte load per pair and k; K unrolled by four into separate
/// accumulators (FMA latency), summed at the end.
template <int NQ>
__attribute__((target("avx512f"))) void block512(const float* w, const float* h, int64_t K, float* out, int64_t stride) {
    constexpr int P = NQ / 2;
    __m512 a[4][P];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u)
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) a[u][p] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 4 <= K; k += 4, w += 4 * NQ * 8) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
            const __m512 hk = _mm512_set1_ps(h[k + u]);
#pragma GCC unroll 2
            for (int p = 0; p < P; ++p) a[u][p] = _mm512_fmadd_ps(hk, _mm512_load_ps(w + (u * NQ + 2 * p) * 8), a[u][p]);
        }
    }
    for (; k < K; ++k, w += NQ * 8) {
        const __m512 hk = _mm512_set1_ps(h[k]);
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) a[0][p] = _mm512_fmadd_ps(hk, _mm512_load_ps(w + 2 * p * 8), a[0][p]);
    }
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
        const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0][p], a[1][p]), _mm512_add_ps(a[2][p], a[3][p]));
        // Each half by a masked store (lanes 8-15 land at gate 2p + 1's row; masked-off lanes are
        // not touched): with the 256-bit cast and extract GCC 12 warned of an uninitialized
        // operand inside its own intrinsics.
        _mm512_mask_storeu_ps(out + 2 * p * stride, 0x00FF, s);
        _mm512_mask_storeu_ps(out + (2 * p + 1) * stride - 8, 0xFF00, s);
    }
}

template <int NQ, bool AVX512>
void all_blocks(const float* w, const float* h, int64_t K, int64_t hp, float* y, bool backward) {
    const int64_t blocks = (hp + 7) / 8;
    auto run_block = [&](const float* wu, float* out, int64_t stride) {
        if constexpr (AVX512 && NQ % 2 == 0) {
            block512<NQ>(wu, h, K, out, stride);
        } else {
            block<NQ>(wu, h, K, out, stride);
        }
    };
    for (int64_t i = 0; i < blocks; ++i) {
        const int64_t u = backward ? blocks - 1 - i : i, n = std::min<int64_t>(8, hp - u * 8);
        const float* wu = w + u * K * NQ * 8;
        if (n == 8) {
            run_block(wu, y + u * 8, hp);
            continue;
        }
        float tail[NQ * 8];
        run_block(wu, tail, 8);  // the last, partial block
        for (int q = 0; q < NQ; ++q)
            std::memcpy(y + q * hp + u * 8, tail + q * 8, static_cast<size_t>(n) * sizeof(float));
    }
}

}  // namespace

void PackedGemv::run(const float* h, float* y, bool backward) const {
    switch (nq_) {
        case 1: all_blocks<1, false>(w_.data(), h, k_, hp_, y, backward); break;
        case 2:
            avx512_ ? all_blocks<2, true>(w_.data(), h, k_, hp_, y, backward)
                    : all_blocks<2, false>(w_.data(), h, k_, hp_, y, backward);
            break;
        case 3: all_blocks<3, false>(w_.data(), h, k_, hp_, y, backward); break;
        default:
            avx512_ ? all_blocks<4, true>(w_.data(), h, k_, hp_, y, backward)
                    : all_blocks<4, false>(w_.data(), h, k_, hp_, y, backward);
            break;
    }
}

void PackedGemv::set_avx512(bool on) {
    static const bool cpu = __builtin_cpu_supports("avx512f") && [] {
        const char* v = std::getenv("KILN_RNN_GEMV_AVX512");  // 0: the AVX2 kernel (for A/Bs)
        return !(v && std::string(v) == "0");
    }();
    avx512_ = on && cpu && nq_ % 2 == 0;
}

bool PackedGemv::supported() {
    static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return ok;
}
#else
void PackedGemv::run(const float*, float*, bool) const {}
void PackedGemv::set_avx512(bool) {}
bool PackedGemv::supported() { return false; }
#endif

}  // namespace kiln::runtime::rnn
