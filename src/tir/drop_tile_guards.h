// drop_tile_guards: removes the tail guard from a register tile's accumulation.
//
// Lowering a split whose factor does not divide its extent guards the innermost statement
// (`if (jo*64 + ji < 196)`), also where that statement only accumulates into a kernel-local tile
// (Stage::cache_write_local) from operands that are padded to whole tiles (a packed B's zero
// columns). Inside a matmul's k loop the guard keeps the C compiler from vectorizing the FMAs:
// MLP-Mixer's token mixing (N = 196 in tiles of 64) ran at 2 GFLOP/s. The tile's padding lanes
// may just as well be computed, as long as nothing reads them. An If is dropped when:
//  - it has no else, and its then-case stores only into local buffers;
//  - every load and store index in it stays inside its buffer for every value of the enclosing
//    loops (interval bounds from the loop extents), guard or not;
//  - every other read of those local buffers sits under an If with the same condition (the
//    tile's write-back), so the values of the padding lanes never leave the tile.
#pragma once

#include "tir/stmt.h"

namespace kiln::tir {

PrimFunc drop_tile_guards(PrimFunc f);

}  // namespace kiln::tir
