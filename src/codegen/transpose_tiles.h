// Which loop nests the C emitter prints as one in-register 16 x 16 transpose.
//
// A transpose that moves the input's contiguous axis (op/defs/shape.cc, transpose_schedule)
// runs tiles of 16 x 16 elements: for each of the tile's 16 output rows, a vectorized loop of
// 16 stores whose loads step through 16 different input lines. GCC 12 makes each such load a
// gather (or 16 scalar loads), so a [8, 12, 128, 128] f32 transpose ran at 12.5 GB/s on one
// thread, half a plain copy's speed; the attention's head transposes were the largest cost of
// a BERT-style training step after its matrix products. The tile is 16 contiguous loads, a
// fixed network of shuffles and 16 contiguous stores instead (the prelude's
// kiln_transpose_16x16_4b: AVX-512, else four 8 x 8 AVX tiles, else scalar).
//
// Matched: a loop of constant extent 16 whose body is only a vectorized loop of extent 16
// whose body is only a store of a load (a pure copy of a 4-byte type between two different
// buffers, no conversion), the store moving by 1 with the inner index and by a constant S_out
// with the outer one, the load by 1 with the outer index and by a constant S_in with the inner.
#pragma once

#include <cstdint>
#include <optional>

#include "tir/stmt.h"

namespace kiln::codegen {

/// A loop nest that is one 16 x 16 tile transpose: out[o + r * out_stride + c] =
/// in[i + c * in_stride + r] for r (the outer loop's index), c (the inner's) in [0, 16).
struct TransposeTile {
    const tir::StoreNode* store = nullptr;
    const te::BufferLoadNode* load = nullptr;
    const te::VarNode* inner = nullptr;  // the vectorized loop's index
    int64_t out_stride = 0;              // elements between the tile's output rows
    int64_t in_stride = 0;               // elements between the tile's input rows
};

/// The tile loop nest `outer` is, or nullopt where it is not one (see the header comment).
std::optional<TransposeTile> match_transpose_tile(const tir::ForNode& outer);

}  // namespace kiln::codegen
