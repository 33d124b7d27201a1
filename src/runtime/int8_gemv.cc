#include "runtime/int8_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "runtime/cpu_features.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kLanes = 16;  // int32 lanes of a zmm: columns per block
constexpr int64_t kTile = 4;    // blocks per tile: a group's 4 x 64 bytes are one contiguous run
constexpr int64_t kTileBytes = kTile * kLanes * 4;
constexpr int64_t kAhead = 16;  // groups prefetched ahead (4 KB; 32 was slower)

/// Four activation bytes (k = 4g .. 4g+3, zero past K) as one int32 for vpbroadcastd, in u8
/// (s8 activations shifted by 128: the zero point moves with them).
inline int32_t quad(const uint8_t* row, int64_t k, int64_t g, uint8_t flip) {
    uint8_t b[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < 4 && 4 * g + i < k; ++i) b[i] = static_cast<uint8_t>(row[4 * g + i] ^ flip);
    int32_t v;
    std::memcpy(&v, b, 4);
    return v;
}

/// Rows x (one to four blocks of 16 columns): acc[r][block] += A quad . B block, per group.
template <int kRows, int kBlocks>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile(const std::vector<int32_t>* quads, const int8_t* b,
                                                                int64_t groups, int32_t* out, int64_t ld) {
    __m512i acc[kRows][kBlocks];
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kBlocks; ++c) acc[r][c] = _mm512_setzero_si512();
    for (int64_t g = 0; g < groups; ++g) {
        // B streams from L3 (ResNet-50's 2 MB, MobileNetV2's 1.3 MB): its lines requested
        // kAhead groups early.
        for (int c = 0; c < kBlocks; ++c)
            _mm_prefetch(reinterpret_cast<const char*>(b + (g + kAhead) * kTileBytes + c * kLanes * 4), _MM_HINT_T0);
        __m512i w[kBlocks];
        for (int c = 0; c < kBlocks; ++c) w[c] = _mm512_loadu_si512(b + g * kTileBytes + c * kLanes * 4);
        for (int r = 0; r < kRows; ++r) {
            const __m512i x = _mm512_set1_epi32(quads[r][static_cast<size_t>(g)]);
            for (int c = 0; c < kBlocks; ++c) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], x, w[c]);
        }
    }
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kBlocks; ++c) _mm512_storeu_si512(out + r * ld + c * kLanes, acc[r][c]);
}

template <int kRows>
void tile_blocks(int blocks, const std::vector<int32_t>* quads, const int8_t* b, int64_t groups, int32_t* out, int64_t ld) {
    switch (blocks) {
        case 1: tile<kRows, 1>(quads, b, groups, out, ld); break;
        case 2: tile<kRows, 2>(quads, b, groups, out, ld); break;
        case 3: tile<kRows, 3>(quads, b, groups, out, ld); break;
        default: tile<kRows, 4>(quads, b, groups, out, ld); break;
    }
}

}  // namespace

bool Int8Gemv::available() { return missing_cpu_features({"avx512f", "avx512bw", "avx512vnni"}).empty(); }

Int8Gemv::Int8Gemv(const int8_t* b, int64_t k, int64_t n) : k_(k), n_(n), groups_((k + 3) / 4) {
    const int64_t tiles = (n + kTile * kLanes - 1) / (kTile * kLanes);
    packed_.assign(static_cast<size_t>(tiles * groups_ * kTileBytes), 0);
    column_sums_.assign(static_cast<size_t>(n), 0);
    for (int64_t t = 0; t < k; ++t)
        for (int64_t j = 0; j < n; ++j) {
            const int8_t v = b[t * n + j];
            const int64_t tile = j / (kTile * kLanes), block = j % (kTile * kLanes) / kLanes;
            packed_[static_cast<size_t>((tile * groups_ + t / 4) * kTileBytes + (block * kLanes + j % kLanes) * 4 +
                                        t % 4)] = v;
            column_sums_[static_cast<size_t>(j)] += v;
        }
}

void Int8Gemv::run(const void* a, int64_t rows, bool a_signed, int32_t zp, int64_t c0, int64_t c1, int32_t* acc) const {
    const uint8_t flip = a_signed ? 0x80 : 0;  // s8 + 128 as u8; its zero point moves by 128 too
    const int32_t zero = a_signed ? zp + 128 : zp;
    std::vector<int32_t> quads[kMaxRows];
    for (int64_t r = 0; r < rows; ++r) {
        quads[r].resize(static_cast<size_t>(groups_));
        const uint8_t* row = static_cast<const uint8_t*>(a) + r * k_;
        for (int64_t g = 0; g < groups_; ++g) quads[r][static_cast<size_t>(g)] = quad(row, k_, g, flip);
    }
    const int64_t width = c1 - c0;
    std::vector<int32_t> block(static_cast<size_t>(kMaxRows * 4 * kLanes));
    for (int64_t j = c0, blocks = 0; j < c1; j += blocks * kLanes) {
        // The blocks of j's tile from j's on (a range may start inside a tile).
        const int64_t first = j % (kTile * kLanes) / kLanes;
        blocks = std::min<int64_t>(kTile - first, (c1 - j + kLanes - 1) / kLanes);
        const int8_t* b = packed_.data() + j / (kTile * kLanes) * groups_ * kTileBytes + first * kLanes * 4;
        const int64_t ld = 4 * kLanes;
        const int nb = static_cast<int>(blocks);
        switch (rows) {
            case 1: tile_blocks<1>(nb, quads, b, groups_, block.data(), ld); break;
            case 2: tile_blocks<2>(nb, quads, b, groups_, block.data(), ld); break;
            case 3: tile_blocks<3>(nb, quads, b, groups_, block.data(), ld); break;
            default: tile_blocks<4>(nb, quads, b, groups_, block.data(), ld); break;
        }
        const int64_t cols = std::min<int64_t>(blocks * kLanes, c1 - j);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                acc[r * width + (j - c0) + c] =
                    block[static_cast<size_t>(r * ld + c)] - zero * column_sums_[static_cast<size_t>(j + c)];
    }
}

}  // namespace kiln::runtime
