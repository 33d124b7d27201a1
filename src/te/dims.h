// Symbolic dims: a tensor's dim, an iter var's extent or a buffer's size may be an int64
// expression of dim Vars (`batch`, `seq`, `batch*seq`) instead of a number.
//
//   Var n = make_dim("n");
//   Tensor x = sym_placeholder({n, int_imm(384)}, DType::kFloat32, "x");   // [n, 384]
//
// Representation (chosen so every static-shape caller is untouched): the int64 fields
// (TensorNode::shape, IterVarNode::extent, BufferNode::shape) keep their meaning for static
// dims and hold kDynamicDim for symbolic ones; the expressions live beside them (sym_shape,
// sym_extent), present only when at least one dim is symbolic. An expression that folds to an
// IntImm is static, so a builder taking Expr dims gives exactly the static objects when handed
// constants. Dim expressions use Vars, IntImms and + - * floordiv floormod min max only.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "te/expr.h"

namespace kiln::te {

/// A symbolic dim: an int64 Var (identity is the node, as for every Var).
Var make_dim(const std::string& name);

/// True (and *v) when `e` is an integer immediate.
bool const_int(const Expr& e, int64_t* v);

/// Validates a dim expression (int, built from Vars, IntImms and + - * floordiv floormod min
/// max) and returns it as int64. A negative IntImm is an error. `what` names the owner in the
/// kInvalidArgument message.
Expr check_dim_expr(const Expr& e, const std::string& what);

/// A list of dims split into the int64 form (kDynamicDim where symbolic) and the expressions
/// (empty when every dim is static).
struct SplitDims {
    std::vector<int64_t> shape;
    std::vector<Expr> sym;
};
SplitDims split_dims(const std::vector<Expr>& dims, const std::string& what);

/// Appends the Vars of `e` not yet in `out`, in first-appearance order.
void collect_dim_vars(const Expr& e, std::vector<Var>& out);

/// Values of the dim Vars, by identity.
using DimValues = std::unordered_map<const VarNode*, int64_t>;
/// The value of a dim expression; kInvalidArgument for an unbound Var, an int64 overflow or a
/// division by zero (never UB).
int64_t eval_dim(const Expr& e, const DimValues& dims);

/// Structural equality of dim expressions (Vars by identity).
bool same_dim(const Expr& a, const Expr& b);
bool same_dims(const std::vector<Expr>& a, const std::vector<Expr>& b);

/// The product of dims (1 for none), folded where constant.
Expr dims_product(const std::vector<Expr>& dims);

}  // namespace kiln::te
