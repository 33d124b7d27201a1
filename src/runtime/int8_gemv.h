// A few rows times a constant int8 matrix on VNNI (vpdpbusd: 4 u8 x s8 products summed into
// each int32 lane): the batch-1 classifier and decoder GEMVs of dynamically quantized models.
// oneDNN 2.6's int8 matmul spent ~150 us on ResNet-50's 1x2048x1000 classifier (a third of the
// time it takes to stream the 2 MB of weights from L2/L3 at this machine's rate); this packs B
// once so that each 64-byte load feeds one vpdpbusd of 16 columns.
//
// The result is exact: int32 accumulation without saturation (vpdpbusd, not vpdpbusds), the
// activation zero point subtracted through B's column sums, so acc = sum_t (a[t] - zp) * b[t][j]
// as ONNX's MatMulInteger defines it.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::runtime {

class Int8Gemv {
public:
    /// Whether this host runs it (AVX-512 with VNNI).
    static bool available();
    /// At most this many rows per call.
    static constexpr int64_t kMaxRows = 4;

    /// Packs B [K, N] (row-major s8): per tile of 64 columns, ceil(K/4) groups of 4 blocks of
    /// 16 x 4 bytes (K and N padded with zeros), so that a tile's 4 x 64-byte loads per group
    /// read one contiguous stream for the prefetcher (with one stream per block of 16 columns,
    /// MobileNetV2's 1280x1000 classifier took 26.9 us in the model, now 24.3), and B's column sums.
    Int8Gemv(const int8_t* b, int64_t k, int64_t n);

    /// acc[r * (c1 - c0) + (j - c0)] = sum_t (a[r * K + t] - zp) * B[t][j] for rows r < rows
    /// (<= kMaxRows) and columns [c0, c1), c0 a multiple of 16. `a_signed`: A is s8 (else u8).
    void run(const void* a, int64_t rows, bool a_signed, int32_t zp, int64_t c0, int64_t c1, int32_t* acc) const;

    int64_t k() const { return k_; }
    int64_t n() const { return n_; }

private:
    int64_t k_ = 0, n_ = 0, groups_ = 0;  // groups_: ceil(K / 4)
    std::vector<int8_t> packed_;          // [ceil(N/64)][groups_][4][16][4]
    std::vector<int32_t> column_sums_;    // N
};

}  // namespace kiln::runtime
