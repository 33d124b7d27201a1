// Arithmetic simplification of tir: constant folding, identities (x*1, x+0, x*0 for ints,
// min/max of constants), folding of (a*c1)*c2 and (a+c1)+c2 for index math, floordiv/floormod
// of affine terms with known ranges from enclosing loops, removal of loops of extent 1
// (substituting 0) and of Ifs whose condition is provably true or false.
#pragma once

#include "tir/stmt.h"

namespace kiln::tir {

te::Expr simplify(const te::Expr& e);
Stmt simplify(const Stmt& s);
PrimFunc simplify(PrimFunc f);

}  // namespace kiln::tir
