// partition_loops: index-set splitting of a vectorized loop where a select on its variable flips.
//
// A vectorized loop `for i in 0..N` whose body holds select(i < C, a, b) — a Concat along the
// last axis, the borders of a padded copy (`i >= 1 && i < 113`) — evaluates both branches in
// every lane, each through clamped indices that the C compiler turns into gathers. The loop is
// split at every such C in (0, N) into loops over [c_k, c_k+1) (the variable offset by c_k):
// the simplifier, knowing each piece's range, then folds the select to one branch and the
// clamps to plain affine indices, so each piece is a unit-stride (or strided) vector loop. A
// clamp min/max(a*i + k, c) cuts where it stops binding too (a separable MaxPool's edge taps:
// max(2*i - 1, 0) binds at i = 0 only). Cuts come from a*i + k (a > 0) against a constant,
// only static extents, at most kMaxPieces (8) pieces per loop. A serial loop around a vectorized
// one splits the same way where a select's condition on its own variable flips (a Concat's
// boundary at a multiple of the vector length, `select(i_o < 100, ..)` once the simplifier
// dropped the aligned lane term); its clamps do not cut. Run before the final simplify.
#pragma once

#include "tir/stmt.h"

namespace kiln::tir {

PrimFunc partition_loops(PrimFunc f);

}  // namespace kiln::tir
