// Small helpers shared by the op definitions: error labels, dtype sets and checks, axis
// normalization, static-dimension access and index clamping for guarded reads.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "te/tensor.h"

namespace kiln::op {

/// "Conv node 'c1'" — the prefix of every op error message.
std::string node_label(const ir::Node& n);
/// "[2,3,N]"
std::string dims_str(const std::vector<ir::Dim>& dims);
std::vector<ir::Dim> to_dims(const Shape& s);

/// Dtype sets used by op schemas.
const std::vector<DType>& float_types();    // f32 f64 f16 bf16
const std::vector<DType>& numeric_types();  // floats and every int
const std::vector<DType>& all_types();      // numeric + bool

/// The type of input i; throws kInvalidModel naming `what` if the input is omitted.
const ir::TensorType& input_type(const ir::Node& n, size_t i, const char* what);
bool has_input(const ir::Node& n, size_t i);

/// Throws kUnsupported naming node, op and dtype unless t is in `allowed`.
void check_dtype(const ir::Node& n, const char* what, DType t, const std::vector<DType>& allowed);
/// Throws kInvalidModel "expected the same dtype for A and B, got f32 and i64".
void check_same_dtype(const ir::Node& n, const char* a_name, DType a, const char* b_name, DType b);
/// Throws kInvalidModel unless `rank` equals `want`.
void check_rank(const ir::Node& n, const char* what, int rank, int want);

/// Maps a possibly negative axis into [0, rank); throws kInvalidModel naming the attribute.
int normalize_axis(const ir::Node& n, int64_t axis, int rank, const char* attr = "axis");
/// The value of a static dim; throws kUnsupported when symbolic.
int64_t static_dim(const ir::Node& n, const ir::Dim& d, const char* what);

/// Values of a constant integer input (Reshape's shape); throws if not a constant.
std::vector<int64_t> constant_ints(const ir::Node& n, size_t i, const char* what);

/// clamp(i, 0, extent-1): keeps guarded reads (under a select) in bounds.
te::Expr clamp_index(const te::Expr& i, int64_t extent);
/// A lowest / highest value of compute dtype t (for max / min paddings).
te::Expr lowest_value(DType t);

}  // namespace kiln::op
