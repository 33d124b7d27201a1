// Which vectorized loops the C emitter keeps away from GCC's early complete peeling.
//
// GCC 12 peels a loop of at most 16 iterations completely (cunrolli) before its loop vectorizer
// runs, and then often vectorizes the loop *around* it instead: a conv micro-kernel's
// reduction over the 16 input channels of a block became 16 lanes over that reduce index with a
// permute per accumulator (vpermt2ps). `#pragma GCC unroll 1` on the short loop keeps it for the
// vectorizer, which makes it one vector operation. Serial, one thread: MobileNetV3's
// squeeze-and-excitation 1x1 convs (576 -> 144 at 1x1) 34 us peeled, 5 us kept; its global
// average pools 13.6 -> 2.3 us.
//
// Only where every access in the loop is contiguous in it (index coefficient 1) or does not move
// with it: a strided or floormod access vectorizes to a gather or a permuted load, and there the
// peeled code was faster (the transpose out of the blocked layout, 17.5 -> 33.6 us kept; a
// channel scale reading an 8-channel block into 16 lanes, 38 -> 60 us kept).
#pragma once

#include <cstdint>
#include <optional>

#include "tir/stmt.h"

namespace kiln::codegen {

/// How far index `e` moves per step of `v`: its coefficient of `v` in the affine form (0 where
/// `e` does not use `v`), or nullopt where `v` enters other than linearly (inside a floordiv, a
/// floormod, a load or a product of vars).
std::optional<int64_t> index_step(const te::Expr& e, const te::VarNode* v);

/// True for a vectorized loop that should get `#pragma GCC unroll 1`: a constant extent of at
/// most 16 (one vector on every target) and only unit-stride or loop-invariant accesses.
bool keep_for_vectorizer(const tir::ForNode& f);

}  // namespace kiln::codegen
