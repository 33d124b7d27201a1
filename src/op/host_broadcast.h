// Numpy multidirectional broadcasting over run-time shapes, for host kernels (op/host.h): the
// result shape of two or more operands and, per operand, the flat index it reads for each output
// element (right-aligned; a size-1 dimension reads index 0). The compile-time counterpart over
// symbolic dims is op/broadcast.h.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "support/tensor.h"

namespace kiln::op {

/// The numpy broadcast shape of `shapes`; a kInvalidArgument error naming the node and the
/// shapes when two sizes differ and neither is 1.
Shape host_broadcast_shape(const ir::Node& n, const std::vector<Shape>& shapes);

/// For each element of `out` (row-major), the flat row-major index of the element of an operand
/// of shape `in` it reads. `in` must broadcast to `out` (checked: kInternal otherwise).
std::vector<int64_t> host_broadcast_index(const Shape& in, const Shape& out);

}  // namespace kiln::op
