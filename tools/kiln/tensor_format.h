// Text forms of tensor values for the CLI: one element, and the first few elements of a tensor.
#pragma once

#include <cstdint>
#include <string>

#include "support/tensor.h"

namespace kiln::cli {

/// Element i as text: floats like printf "%g" (nan, inf, -inf), integers exactly, bools true/false.
std::string format_element(const Tensor& t, int64_t i);

/// The first `limit` elements joined by ", ", with ", ..." when the tensor has more.
std::string format_leading_values(const Tensor& t, int64_t limit);

}  // namespace kiln::cli
