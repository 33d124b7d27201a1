// How a oneDNN step splits across Kiln's intra-op pool (runtime/dnnl_kernels.cc): oneDNN runs
// single-threaded, one primitive per part, and the parts run on the pool, so a step keeps at
// most `parts` threads busy. Pure functions of the shape and the thread count, shared with the
// compiler's kernel-choice rule (compiler/compile.cc), which keeps a unit generated where
// oneDNN's parts would leave most threads idle.
#pragma once

#include <cstdint>

namespace kiln::runtime {

/// A convolution's split: whole images (kBatch), blocks of `unit_m` output channels of one
/// image (kChannels: 16, or 8 where the output is in 8-channel blocks or plain and M is no
/// multiple of 16), or whole groups `unit_g` at a time whose input and output channels are
/// multiples of 16 (kGroups; depthwise: 16 channels).
struct ConvSplit {
    enum By { kNone, kBatch, kChannels, kGroups };
    By by = kNone;
    int64_t parts = 1;
    int64_t unit_m = 0;  // kChannels: output channels per unit
    int64_t unit_g = 0;  // kGroups: groups per unit
};

/// The split of a (de)convolution with `n` images, `c` input and `m` output channels in
/// `groups` groups over `threads` threads, its output in blocks of `dst_block` channels (0:
/// plain): at most `threads` parts, fewer where the step has fewer units (a 64-channel conv of
/// one image: 4 parts at any thread count from 4; MobileNetV2's 24-channel projections, in
/// blocks of 8: 3). Groups split in units of whole 16-channel blocks, or of 8-channel ones where
/// that side is in blocks of 8 (`src_block`: the input's block): RegNetY's 13 and 55 groups of
/// 8 channels, MNASNet's 72-channel depthwise convs, were one part on any thread count.
ConvSplit dnnl_conv_split(int64_t n, int64_t c, int64_t m, int64_t groups, int threads, int64_t dst_block = 16,
                          int64_t src_block = 16);

/// Whether one image (`n` 1) of a 2-D dense conv with `out_rows` output rows and a window of
/// `taps` taps splits by bands of output rows instead of output channels: few output channels
/// (fewer than 32 per thread), no multiple of 16 (24: channel parts of 8 and 16, each padded to
/// a lone 16-channel block, where oneDNN's jit conv ran at half its rate: PP-OCR det's 96->24
/// 3x3 at 160x160 took as long in two parts as in one), at least 8 rows per part, and at least
/// 32 FLOPs per byte the bands' copies of their rows move (read and written once each way), or
/// fewer than 8 input channels (a stem: every channel part reordered the whole image;
/// ShuffleNetV2's 3 -> 24 3x3 stride 2 took 155 us on two parts of 8 and 16 channels, 151 on one).
/// Whole 16-channel blocks stay split by channels (U-Net's 32->32 3x3 at 128x128 measured
/// slower by rows), as do many channels (RegNet's 440).
bool dnnl_conv_split_rows(int64_t n, int64_t c, int64_t m, int64_t groups, int64_t out_rows, int64_t taps,
                          int threads);

/// A matmul's split: the batch, rows of A (at least 16 per part), or (one row) columns of B
/// (at least 64 per part).
struct MatmulSplit {
    enum By { kNone, kBatch, kRows, kCols };
    By by = kNone;
    int64_t parts = 1;
};

/// The split of a [batch, m, k] x [k, n] product over `threads` threads.
MatmulSplit dnnl_matmul_split(int64_t batch, int64_t m, int64_t n, int threads);

}  // namespace kiln::runtime
