// The splits of oneDNN steps over the intra-op pool (see the header). Fewer parts than threads
// where a step has fewer units: the fallback used to be one part (oneDNN on one thread), and on
// 16 threads ResNet-50's 64-channel 3x3 convs ran 2.6x slower than on 4 (0.8 -> 2.1 ms).
#include "runtime/extern_split.h"

#include <algorithm>

namespace kiln::runtime {

ConvSplit dnnl_conv_split(int64_t n, int64_t c, int64_t m, int64_t groups, int threads, int64_t dst_block,
                          int64_t src_block) {
    ConvSplit s;
    if (threads <= 1 || n < 1 || c < 1 || m < 1 || groups < 1) return s;
    if (n > 1) {
        s.by = ConvSplit::kBatch;
        s.parts = std::min<int64_t>(n, threads);
    } else if (groups == 1) {
        // A slice of whole blocks of one image is contiguous in NCHW{b}c (and in plain NCHW).
        s.unit_m = m % 16 == 0 ? 16 : m % 8 == 0 && (dst_block == 8 || dst_block == 0) ? 8 : 0;
        if (s.unit_m) {
            s.by = ConvSplit::kChannels;
            s.parts = std::min<int64_t>(m / s.unit_m, threads);
        }
    } else {
        const int64_t cg = c / groups, mg = m / groups;
        // A unit's channels are whole blocks of each side (a slice of them is contiguous).
        const int64_t cb = src_block == 8 ? 8 : 16, mb = dst_block == 8 ? 8 : 16;
        for (int64_t u = 1; u <= groups && !s.unit_g; ++u)
            if (groups % u == 0 && (u * cg) % cb == 0 && (u * mg) % mb == 0) s.unit_g = u;
        if (s.unit_g) {
            s.by = ConvSplit::kGroups;
            s.parts = std::min<int64_t>(groups / s.unit_g, threads);
        }
    }
    if (s.parts <= 1) s = ConvSplit{};
    return s;
}

bool dnnl_conv_split_rows(int64_t n, int64_t c, int64_t m, int64_t groups, int64_t out_rows, int64_t taps,
                          int threads) {
    if (threads < 2 || n != 1 || groups != 1 || out_rows < 8 * threads || m % 16 == 0 || m >= 32 * threads)
        return false;
    // A stem's few input channels (an image's 3): channel parts would each read and reorder the
    // whole image, bands of rows only theirs.
    if (c < 8) return true;
    return 2.0 * c * taps * m / (8.0 * (c + m)) >= 32;  // FLOPs per byte copied
}

MatmulSplit dnnl_matmul_split(int64_t batch, int64_t m, int64_t n, int threads) {
    MatmulSplit s;
    if (threads <= 1) return s;
    if (batch % threads == 0) s = {MatmulSplit::kBatch, threads};
    else if (batch == 1 && m >= 32) s = {MatmulSplit::kRows, std::min<int64_t>(m / 16, threads)};
    else if (batch == 1 && m == 1 && n >= 128) s = {MatmulSplit::kCols, std::min<int64_t>(n / 64, threads)};
    else if (batch > 1) s = {MatmulSplit::kBatch, std::min<int64_t>(batch, threads)};
    if (s.parts <= 1) s = MatmulSplit{};
    return s;
}

}  // namespace kiln::runtime
