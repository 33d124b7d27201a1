// Numpy multidirectional broadcasting: the result shape of several operands and the index map
// of a broadcast read (right-aligned; a size-1 input dimension reads index 0).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "te/tensor.h"

namespace kiln::op {

/// The broadcast shape of `shapes`. Symbolic dims propagate (a symbol against 1 stays the
/// symbol; a symbol against a known size > 1 becomes that size). Throws kInvalidModel
/// "Add node 'a': shapes [2,3] and [4] are not broadcastable".
std::vector<ir::Dim> broadcast_shapes(const ir::Node& n, const std::vector<std::vector<ir::Dim>>& shapes);

/// Indices into a tensor of `in_shape` for the output element at `out_idx` (rank >= in rank).
std::vector<te::Expr> broadcast_indices(const std::vector<int64_t>& in_shape, const std::vector<te::Var>& out_idx);

/// read(t, broadcast_indices(t->shape, out_idx)).
te::Expr broadcast_read(const te::Tensor& t, const std::vector<te::Var>& out_idx);

}  // namespace kiln::op
