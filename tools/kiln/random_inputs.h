// Seeded random input data for `kiln run`: the same seed gives the same tensors on every machine.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/session.h"

namespace kiln::cli {

/// Concrete shape of `info`: symbolic dims resolved from `dims`; kInvalidArgument
/// ("input 'x' has symbolic dimension 'N': pass --dim N=VALUE") when one is unbound or unknown.
Shape resolve_input_shape(const TensorInfo& info, const std::map<std::string, int64_t>& dims);

/// Fills a tensor of `dtype` and `shape`: floats uniform in [-1, 1), integers uniform in [0, 10)
/// (every integer dtype holds them), bools true or false with equal chance.
class RandomInputs {
public:
    explicit RandomInputs(uint64_t seed) : state_(seed) {}
    Tensor make(DType dtype, const Shape& shape);

private:
    uint64_t next();  // splitmix64: fixed algorithm, so results do not depend on the C++ library
    uint64_t state_;
};

}  // namespace kiln::cli
