// Node attributes: a small closed set of kinds, mirroring ONNX's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "support/tensor.h"

namespace kiln::ir {

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                          std::vector<std::string>, Tensor>;

/// Attributes of a node, sorted by name (so printing and hashing are deterministic).
using AttrMap = std::map<std::string, Attr>;

/// "3", "0.5", "\"same\"", "[1,1]", "tensor<f32[2]>[...]" — the IR text form of an attribute.
std::string attr_str(const Attr& a);

}  // namespace kiln::ir
