// Tensor fusion (Horovod's): the tensors of one collective call are packed into as few buffers
// as fit, one per dtype up to a byte limit, so that many small gradients cost one MPI call
// instead of one each. A tensor larger than the limit travels alone, in place (no copy).
#pragma once

#include <cstddef>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::distributed {

struct FusionBuffer {
    DType dtype;
    std::vector<size_t> members;  // indices into the call's tensors, in call order
    size_t bytes = 0;
};

/// Groups tensors (given by dtype and byte size, in call order) into buffers: each tensor joins
/// the open buffer of its dtype when the buffer stays within `limit` bytes, else opens a new
/// one. Every index appears in exactly one buffer; buffers are ordered by their first member.
std::vector<FusionBuffer> plan_fusion(const std::vector<DType>& dtypes, const std::vector<size_t>& bytes, size_t limit);

}  // namespace kiln::distributed
