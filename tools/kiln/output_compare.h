// Comparing a computed tensor with an expected one, as the ONNX backend tests do.
#pragma once

#include <optional>
#include <string>

#include "support/datum.h"
#include "support/tensor.h"

namespace kiln::cli {

struct Tolerance {
    double rtol = 1e-3;
    double atol = 1e-5;
};

/// nullopt when `got` matches `expected`: same dtype and shape; floats within
/// |got - exp| <= atol + rtol * |exp| (NaN matches NaN, infinities match themselves); integers and
/// bools exactly. Otherwise one line naming output `name`, e.g.
/// "output 'y' element 17: expected 0.5, got 0.6 (3 of 6 elements differ)".
std::optional<std::string> compare_output(const std::string& name, const Tensor& expected,
                                          const Tensor& got, const Tolerance& tol);

/// The same for any value: kinds must match (an empty optional matches only an empty one);
/// sequences compare item by item ("output 'y[2]' element 0: ...").
std::optional<std::string> compare_value(const std::string& name, const Datum& expected, const Datum& got,
                                         const Tolerance& tol);

}  // namespace kiln::cli
