// The reductions of allreduce and reduce-scatter, and how each maps onto MPI for a dtype.
//
// Every integer and float dtype Kiln computes with is carried: f32 f64 i8..i64 u8..u64 as MPI's
// own types and operations, f16 and bf16 as 16-bit words reduced by operations of our own
// (MPI has no half type): each element is widened to f32, combined and rounded back, which is
// what numpy does for two operands. kMean is a sum followed by a division by the rank count on
// the result (integers: truncated towards zero, as C divides).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

#include "kiln/dtype.h"

namespace kiln::distributed {

enum class ReduceOp { kSum, kMean, kMin, kMax, kProd };

/// "sum", "mean", "min", "max", "prod".
const char* reduce_op_name(ReduceOp op);

/// The MPI datatype of one element of `dtype`; kUnsupported naming `tensor` for a dtype
/// collectives do not carry (bool, strings, the 8- and 4-bit float types).
MPI_Datatype mpi_datatype(DType dtype, const std::string& tensor);

/// The MPI operation computing `op` on `dtype` (kMean: the sum; divide_in_place finishes it).
MPI_Op mpi_op(ReduceOp op, DType dtype);

/// data[i] /= divisor for `count` elements of `dtype` (the second half of kMean).
void divide_in_place(void* data, DType dtype, size_t count, int divisor);

}  // namespace kiln::distributed
