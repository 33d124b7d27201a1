// Softmax without subnormal floats: the exp stage and the probabilities flushed to zero where
// they would be subnormal, as a flush-to-zero mode would give them.
//
// Why: a score masked by a moderate constant (Swin's shifted windows add -100) gives
// probabilities around e^-100 = 4e-44 (a mask of the float minimum gives exact zeros: those
// were never the problem). Every arithmetic op that produces or
// reads a subnormal takes a microcode assist on x86 cores: Swin-T's attention products
// ([192, 49, 49] x [192, 49, 32]) took 4.6-5.5 ms with the mask against 0.27 ms without, and
// its Softmax kernels 5.9 ms per run against 4.5 (one Xeon thread). A normal probability is
// never changed; NaN (a row of -inf) stays NaN.
#pragma once

#include <limits>

#include "te/expr.h"

namespace kiln::op {

/// exp(d) for d = x - rowmax <= 0, or 0 where d < -87: d is clamped first, so the exp itself
/// never rounds into the subnormals (kiln_exp_f32 scales by powers of two). e^-87 = 1.6e-38 lies
/// one exponent step above float's smallest normal; what is dropped is under 2e-38.
inline te::Expr flushed_exp(const te::Expr& d, DType cdt) {
    if (cdt != DType::kFloat32) return te::unary(te::UnaryOp::kExp, d);
    const te::Expr lo = te::make_const(cdt, -87.0);
    // Selects, not max(d, lo): a NaN d (a row of -inf) must reach the exp as NaN.
    return te::select(d < lo, te::make_const(cdt, 0), te::unary(te::UnaryOp::kExp, te::select(d < lo, lo, d)));
}

/// Probability `p` (>= 0), or 0 where it is subnormal (an exp above the clamp divided by a
/// large row sum).
inline te::Expr flush_subnormal(const te::Expr& p, DType cdt) {
    const double tiny = cdt == DType::kFloat64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
    return te::select(p < te::make_const(cdt, tiny), te::make_const(cdt, 0), p);
}

}  // namespace kiln::op
