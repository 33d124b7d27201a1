// Bytes from NCHW planes to NHWC pixels for a few channels: the u8 input of an int8 stem conv
// (3 channels, 224x224): with oneDNN's reorder the stem step took 35-40 us longer on this host
// (MobileNetV2 86.8 -> 51.5 us, ResNet-50 394-403 -> 359-362 us, per-step minima).
// With AVX-512 VBMI three planes of 64 pixels become 192 interleaved bytes in six byte
// permutes (vpermt2b, then vpermb merged under a mask); elsewhere a plain loop.
#pragma once

#include <cstdint>

namespace kiln::runtime {

/// Whether interleave_planes has a vector path for `channels` on this host.
bool fast_interleave(int64_t channels);

/// out[p * channels + c] = planes[c][p] for p < pixels (channels >= 1; any count, fastest at 3).
void interleave_planes(const uint8_t* const* planes, int64_t channels, int64_t pixels, uint8_t* out);

}  // namespace kiln::runtime
