// What the runtime's 8-bit elementwise kernels (dql_kernel.cc: DynamicQuantizeLinear,
// qadd_kernel.cc: the int8 residual add) share: their parallel chunk, and rounding to nearest
// even by the 1.5 * 2^23 trick.
#pragma once

#include <cstdint>

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
