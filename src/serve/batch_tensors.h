// Concatenating requests' tensors along dimension 0 into one batch, and slicing a batch's
// outputs back into each request's rows. Copies; works for every dtype, strings included.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::serve {

/// Stacks `parts` (same dtype, same dims after the first) along dimension 0.
Tensor concat_rows(const std::vector<const Tensor*>& parts);

/// Rows [begin, begin + rows) of `t` along dimension 0, as a tensor of its own.
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t rows);

}  // namespace kiln::serve
