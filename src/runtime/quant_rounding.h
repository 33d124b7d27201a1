// What the runtime's 8-bit elementwise kernels (dql_kernel.cc: DynamicQuantizeLinear,
// qadd_kernel.cc: the int8 residual add) share: their parallel chunk, and rounding to nearest
// even by the 1.5 * 2^23 trick.
#pragma once

#include <cstdint>

// The 8-bit elementwise loops: one clone per vector ISA, chosen when the library loads (it is
// built for baseline x86-64, where they run 4 floats a step or none), at -O3 (GCC 12's -O2 cost
// model leaves them scalar) and without FMA contraction, so that every clone rounds alike.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define KILN_QUANT_LOOP \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("O3", "fp-contract=off")))
#elif defined(__GNUC__) && !defined(__clang__)
#define KILN_QUANT_LOOP __attribute__((optimize("O3", "fp-contract=off")))
#else
#define KILN_QUANT_LOOP
#endif

namespace kiln::runtime::quant {

/// Elements per task of the intra-op pool.
inline constexpr int64_t kChunk = 16384;

/// 1.5 * 2^23, read through a volatile so that the compiler cannot fold (v + m) - m to v:
/// (v + m) - m rounds v to the nearest integer, ties to even, for |v| < 2^22.
inline float round_magic() {
    static volatile float m = 12582912.f;
    return m;
}

}  // namespace kiln::runtime::quant
