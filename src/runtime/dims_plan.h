// Run-time shapes of an executable with symbolic dims (Executable::dims): the dims' values
// bound from a run's inputs, and the memory plan of its intermediates at those values.
//
// The plan is the static planner's idea evaluated per run: each intermediate lives from the
// first step that touches it to the last; buffers are placed largest first, each at the lowest
// offset that no placed buffer with an overlapping lifetime occupies (greedy by size). It
// costs microseconds for a few hundred buffers, and an executor re-plans only when the dims
// change (the last plan is kept), so it is correct for any sizes the dims give (polynomials
// such as batch*seq*384 included) without a symbolic offset algebra.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

/// The values of exe.dims given by the inputs' shapes (in exe.inputs order). Checks count,
/// dtype, rank and every static axis; a dim two inputs (or two axes) disagree on is a
/// kInvalidArgument naming both inputs, the dim and both values.
Status bind_run_dims(const Executable& exe, const std::vector<Tensor>& inputs, std::vector<int64_t>& dims);

/// Offsets of the kIntermediate buffers of `exe` in one arena at these dim values.
struct DimsPlan {
    std::vector<int64_t> dims;    // the values it was planned for
    std::vector<size_t> bytes;    // per buffer, at those values (0 for an intermediate no step uses)
    std::vector<int64_t> offset;  // per buffer: its arena offset (-1 for non-intermediates)
    size_t arena_bytes = 0;
};

/// Plans the intermediates at `dims` (sizes overflowing int64 are a kInvalidArgument error
/// naming the buffer). Never reads or writes memory.
Status plan_at_dims(const Executable& exe, const std::vector<int64_t>& dims, DimsPlan& out);

}  // namespace kiln::runtime
