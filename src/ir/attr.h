// Node attributes: a small closed set of kinds, mirroring ONNX's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "support/tensor.h"

namespace kiln::ir {

class Graph;
/// A sub-graph attribute (If's branches, Loop's and Scan's body). Shared and immutable once
/// imported, so copying a node's attributes is cheap.
using GraphAttr = std::shared_ptr<const Graph>;

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                          std::vector<std::string>, Tensor, GraphAttr>;

/// Attributes of a node, sorted by name (so printing and hashing are deterministic).
using AttrMap = std::map<std::string, Attr>;

/// "3", "0.5", "\"same\"", "[1,1]", "tensor<f32[2]>[...]" — the IR text form of an attribute.
std::string attr_str(const Attr& a);

/// "int", "float", "string", "ints", "floats", "strings", "tensor" or "graph" (for error messages).
const char* attr_kind_name(const Attr& a);

/// Flat data of a tensor in the IR text form: "[1, 2.5, 3]" (bool: true/false; f16/bf16 print
/// their float value). Floats print the shortest text that reads back to the same value.
std::string tensor_data_str(const Tensor& t);

}  // namespace kiln::ir
