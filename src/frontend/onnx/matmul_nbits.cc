// MatMulNBits weight dequantization (see matmul_nbits.h). Layout from ORT's contrib op schema
// (contrib_defs.cc, MatMulNBits): values are packed along K, lowest bits first (for 4 bits, value
// 2i in the low nibble of byte i); packed zero points use the same packing along the blocks of a
// row, each row starting on a byte.
#include "frontend/onnx/matmul_nbits.h"

#include <vector>

#include "support/error.h"

namespace kiln::frontend {
namespace {

// Value `i` of `bits` bits in a packed byte run (bits divides 8).
int64_t unpack(const uint8_t* bytes, int64_t i, int64_t bits) {
    const int64_t bit = i * bits;
    return (bytes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

// Zero point of (row n, block blk) as a float offset.
std::vector<double> zero_points(const NBitsWeight& w, int64_t k_blocks) {
    std::vector<double> zp(static_cast<size_t>(w.n * k_blocks), static_cast<double>(int64_t{1} << (w.bits - 1)));
    const Tensor* z = w.zero_points;
    if (!z) return zp;
    if (z->dtype() == DType::kUInt8) {
        const int64_t row_bytes = (k_blocks * w.bits + 7) / 8;
        KILN_CHECK(z->numel() == w.n * row_bytes, kInvalidModel)
            << w.who << ": packed zero_points must hold N * ceil(k_blocks * bits / 8) = " << w.n * row_bytes
            << " bytes, got " << z->numel();
        for (int64_t n = 0; n < w.n; ++n)
            for (int64_t blk = 0; blk < k_blocks; ++blk)
                zp[n * k_blocks + blk] = static_cast<double>(unpack(z->data_as<uint8_t>() + n * row_bytes, blk, w.bits));
        return zp;
    }
    KILN_CHECK(z->numel() == w.n * k_blocks, kInvalidModel)
        << w.who << ": zero_points of type " << dtype_name(z->dtype()) << " must hold N * k_blocks = "
        << w.n * k_blocks << " values, got " << z->numel();
    for (int64_t i = 0; i < w.n * k_blocks; ++i) zp[i] = z->get_f64(i);
    return zp;
}

// The block of each k: g_idx, or k / block_size.
std::vector<int64_t> blocks_of_k(const NBitsWeight& w, int64_t k_blocks) {
    std::vector<int64_t> blk(static_cast<size_t>(w.k));
    for (int64_t k = 0; k < w.k; ++k) blk[k] = k / w.block_size;
    if (!w.g_idx) return blk;
    KILN_CHECK(w.g_idx->numel() == w.k, kInvalidModel)
        << w.who << ": g_idx must hold K = " << w.k << " values, got " << w.g_idx->numel();
    for (int64_t k = 0; k < w.k; ++k) {
        blk[k] = w.g_idx->get_i64(k);
        KILN_CHECK(blk[k] >= 0 && blk[k] < k_blocks, kInvalidModel)
            << w.who << ": g_idx[" << k << "] = " << blk[k] << " is not a block index in [0, " << k_blocks << ")";
    }
    return blk;
}

}  // namespace

Tensor dequantize_nbits(const NBitsWeight& w) {
    KILN_CHECK(w.bits == 2 || w.bits == 4 || w.bits == 8, kUnsupported)
        << w.who << ": bits=" << w.bits << " is not supported (2, 4 or 8)";
    KILN_CHECK(w.k > 0 && w.n > 0 && w.block_size >= 16 && (w.block_size & (w.block_size - 1)) == 0, kInvalidModel)
        << w.who << ": K=" << w.k << ", N=" << w.n << ", block_size=" << w.block_size
        << " (K and N positive, block_size a power of 2 >= 16)";
    const int64_t k_blocks = (w.k + w.block_size - 1) / w.block_size;
    const int64_t blob = w.block_size * w.bits / 8;
    Tensor out(w.scales->dtype(), {w.k, w.n});
    if (w.b->numel() == 0) {  // an omitted projection: Y is the bias (or 0)
        for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, 0.0);
        return out;
    }
    KILN_CHECK(w.b->dtype() == DType::kUInt8 && w.b->numel() == w.n * k_blocks * blob, kInvalidModel)
        << w.who << ": B must be uint8 (N, k_blocks, blob_size) = (" << w.n << ", " << k_blocks << ", " << blob
        << "), got " << dtype_name(w.b->dtype()) << " with " << w.b->numel() << " values";
    KILN_CHECK(w.scales->numel() == w.n * k_blocks, kInvalidModel)
        << w.who << ": scales must hold N * k_blocks = " << w.n * k_blocks << " values, got " << w.scales->numel();
    const std::vector<double> zp = zero_points(w, k_blocks);
    const std::vector<int64_t> blk = blocks_of_k(w, k_blocks);
    const uint8_t* q = w.b->data_as<uint8_t>();
    for (int64_t n = 0; n < w.n; ++n) {
        const uint8_t* row = q + n * k_blocks * blob;  // K values (padded to whole blocks), packed
        for (int64_t k = 0; k < w.k; ++k) {
            const int64_t at = n * k_blocks + blk[k];
            const double v = static_cast<double>(unpack(row, k, w.bits)) - zp[at];
            out.set_f64(k * w.n + n, v * w.scales->get_f64(at));
        }
    }
    return out;
}

}  // namespace kiln::frontend
