// Builder shared by the elementwise op families (math, compare/logic, variadic): an op that maps
// N same-dtype inputs, numpy-broadcast to one output shape, through a scalar function of the
// (widened, f16/bf16 -> f32) input elements. One TE stage; fusion pattern kElemWise for one
// input, kBroadcast for more.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "op/op_def.h"

namespace kiln::op {

/// The scalar body: input elements (already broadcast-read) and the node (for attributes).
using ScalarMapFn = std::function<te::Expr(const std::vector<te::Expr>& x, const ir::Node& n)>;

/// An elementwise op with `min_inputs`..`max_inputs` inputs (max < 0: unbounded), all of one
/// dtype from `types` (kUnsupported otherwise, kInvalidModel when they differ). The output has the
/// broadcast shape and dtype `out_dtype` (default: the input dtype). Input names in errors:
/// "X" for one input, "A"/"B" for two, "data_<i>" otherwise.
OpDef map_op(const std::string& name, std::vector<int> versions, int min_inputs, int max_inputs,
             std::vector<DType> types, ScalarMapFn f, std::optional<DType> out_dtype = std::nullopt);

/// map_op with one input: f(x).
OpDef unary_map_op(const std::string& name, std::vector<int> versions, std::vector<DType> types,
                   std::function<te::Expr(te::Expr, const ir::Node&)> f,
                   std::optional<DType> out_dtype = std::nullopt);

/// map_op with two inputs: f(a, b).
OpDef binary_map_op(const std::string& name, std::vector<int> versions, std::vector<DType> types,
                    std::function<te::Expr(te::Expr, te::Expr, const ir::Node&)> f,
                    std::optional<DType> out_dtype = std::nullopt);

/// Integer dtypes (signed and unsigned), unsigned only.
const std::vector<DType>& int_types();
const std::vector<DType>& unsigned_types();

}  // namespace kiln::op
