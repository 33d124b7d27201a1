// Rank-0 tensors of one value: a Loop's trip count and condition, an iteration number.
#pragma once

#include <cstdint>

#include "support/tensor.h"

namespace kiln {

inline Tensor scalar_i64(int64_t v) {
    Tensor t(DType::kInt64, {});
    t.set_i64(0, v);
    return t;
}

inline Tensor scalar_bool(bool v) {
    Tensor t(DType::kBool, {});
    t.set_i64(0, v ? 1 : 0);
    return t;
}

}  // namespace kiln
