// Affine (linear) view of int64 index arithmetic, used by the simplifier to canonicalize
// indices: an expression is a sum of atom*coefficient terms plus a constant, where an atom is
// anything that is not +, -, or * by a constant (a var, a floordiv, a load, ...).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "te/expr.h"

namespace kiln::tir {

/// sum(terms[i].first * terms[i].second) + constant; atoms are pairwise structurally distinct.
struct AffineSum {
    std::vector<std::pair<te::Expr, int64_t>> terms;
    int64_t constant = 0;
};

/// Flattens +, -, unary minus and *-by-constant of int64 expressions, merges equal atoms and
/// folds floordiv(x, c)*(c*k) + floormod(x, c)*k into x*k. Exact in wrap-around arithmetic.
AffineSum to_affine(const te::Expr& e);
/// Rebuilds `x*3 + y - z + 5` style sums (terms in order, constant last).
te::Expr from_affine(const AffineSum& s);
/// Structural equality of expressions (vars and buffers by identity).
bool struct_equal(const te::Expr& a, const te::Expr& b);

}  // namespace kiln::tir
