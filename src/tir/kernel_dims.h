// Binding the symbolic dims of a kernel (PrimFunc::dims) to values for one call: the checks a
// caller runs before a kiln_kernel_dims_fn (runtime/kernel_abi.h) or the interpreter touches a
// buffer, so that bad dims are a kiln::Error and never an out-of-bounds access.
#pragma once

#include <cstdint>
#include <vector>

#include "te/dims.h"
#include "tir/stmt.h"

namespace kiln::tir {

/// Values of f.dims for one call. kInvalidArgument when the count differs from f.dims or a
/// value is negative (naming the dim).
te::DimValues bind_dims(const PrimFunc& f, const std::vector<int64_t>& dims);

/// Element counts of f's params for these dims. kInvalidArgument as bind_dims, and when a
/// buffer's (or a kernel-local allocation's) size in bytes overflows int64.
std::vector<int64_t> param_numels(const PrimFunc& f, const std::vector<int64_t>& dims);

/// The concrete shape of a buffer for bound dims.
std::vector<int64_t> buffer_shape(const Buffer& b, const te::DimValues& dims);

/// Checks one call: dims as param_numels, and argument i holds exactly param_numels()[i]
/// elements (arg_numels[i]); the error names the argument, expected vs got.
void check_call(const PrimFunc& f, const std::vector<int64_t>& dims, const std::vector<int64_t>& arg_numels);

}  // namespace kiln::tir
