// A float matrix transpose, the NCW <-> NWC reorder around oneDNN's 1-D convolutions.
//
// Why not oneDNN's reorder: its jit reorder between ncw and nwc ran at 4-15 GB/s (0.03-0.13 ms
// for a [128, 1024] activation, the slower way nwc -> ncw), a sixth of a TCN's time on two
// reorders per conv; 8x8 register transposes (AVX2, where the CPU has it) move the same bytes at
// L2 speed.
#pragma once

#include <cstdint>

namespace kiln::runtime {

/// dst[c * rows + r] = src[r * cols + c] for r < rows, c < cols (src [rows, cols] row-major into
/// dst [cols, rows]); src and dst must not overlap.
void transpose_2d(const float* src, int64_t rows, int64_t cols, float* dst);

}  // namespace kiln::runtime
