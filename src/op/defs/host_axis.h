// Axis-wise copies of host tensors for the host kernels (op/host.h) of the sequence and
// control-flow ops: slicing a range along one axis, concatenating along an axis and stacking
// along a new axis. Any dtype, strings included (elements are assigned, others are memcpy'd).
#pragma once

#include <string>
#include <vector>

#include "support/tensor.h"

namespace kiln::op {

/// Copies n elements src[src_off, src_off + n) to dst[dst_off, ...) (same dtype).
void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n);

/// t[..., start:start+len, ...] along `axis` (0 <= start, start + len <= dim; the caller
/// validates). keep_axis=false drops the axis (len must be 1).
Tensor slice_axis(const Tensor& t, int axis, int64_t start, int64_t len, bool keep_axis = true);

/// Concatenation of `items` along `axis` (in [0, rank)); all items have the same dtype and rank
/// and equal dims off the axis, else a kInvalidArgument error starting with `who`. items is
/// non-empty.
Tensor concat_axis(const std::vector<Tensor>& items, int axis, const std::string& who);

/// Stacking of `items` along a new axis at `axis` (in [0, rank]); all items have the same dtype
/// and shape, else a kInvalidArgument error starting with `who`. items is non-empty.
Tensor stack_axis(const std::vector<Tensor>& items, int axis, const std::string& who);

}  // namespace kiln::op
