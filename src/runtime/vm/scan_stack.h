// ScanStack: the stacked result of one scan output of a Loop or Scan, written in place.
// slot(i) is a view of slice i that the body's call writes into; settle(i, got) copies in
// whatever the body produced elsewhere (a passthrough, a host callee's fresh tensor) and checks
// that every iteration gives the same shape. The buffer holds `capacity` slices (the trip count
// when known) and doubles when a loop runs past it. finish() gives the result, stacked along
// `axis` (a copy only when axis > 0 or the order is reversed).
#pragma once

#include <cstdint>

#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime::vm {

class ScanStack {
public:
    /// `slice`: the per-iteration shape (a -1 dim: unknown until the first iteration);
    /// `capacity`: slices to preallocate (-1: unknown; not above 64 MiB).
    ScanStack(DType dtype, Shape slice, int64_t capacity);

    /// A view of slice i (undefined while the slice shape is unknown).
    Tensor slot(int64_t i);
    /// After iteration i produced `got`: checks its dtype and shape, copies it into slice i
    /// unless it was written there.
    Status settle(int64_t i, const Tensor& got);
    /// The n slices stacked along `axis`; `reversed`: slice t goes to position n-1-t.
    Tensor finish(int64_t n, int64_t axis, bool reversed);

private:
    void reserve(int64_t slices);
    size_t slice_bytes() const;
    DType dtype_;
    Shape slice_;
    bool known_;
    Tensor buf_;  // [capacity, slice...]
    int64_t capacity_ = 0;
};

}  // namespace kiln::runtime::vm
