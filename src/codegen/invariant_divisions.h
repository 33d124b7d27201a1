// Integer divisions a C loop body can compute once per iteration instead of once per inner
// iteration (the C emitter's loop-invariant hoisting).
//
// A kernel over symbolic dims fuses its parallel axes into one loop over, say, `N * 2 * H` and
// recovers each index as `floordiv(floordiv(i, H), 2)`, `floormod(i, H)`: divisions by a run-time
// dim, printed as the non-trapping helpers, inside the innermost loop. GCC leaves them there (a
// helper with selects is not something it moves out of a loop that may not run), and a 64-bit
// division per element made a symbolic layout conversion 33x its static twin, whose divisors are
// constants GCC turns into multiplies.
#pragma once

#include <vector>

#include "tir/stmt.h"

namespace kiln::codegen {

/// The integer floordiv/floormod subexpressions of `body` (store indices and values, if
/// conditions, inner loop extents) whose divisor is not a constant and that read no buffer and
/// use no variable bound by a loop inside `body`: their value is the same for every inner
/// iteration. Innermost first (a division inside another comes before it); the same expression
/// may appear several times (the emitter keys them by their C text).
std::vector<te::Expr> invariant_divisions(const tir::Stmt& body);

}  // namespace kiln::codegen
