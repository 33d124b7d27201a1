// Tensor data as the KServe v2 protocol carries it: the JSON "data" array of an input or output
// (row-major; nested arrays are flattened), and the binary tensor data extension (raw
// little-endian row-major bytes; BOOL one byte per element; BYTES each element a 4-byte
// little-endian length followed by its bytes).
//
// Decoding throws kiln::Error (kInvalidArgument) whose message names the input and says what
// was expected and what came; it validates every size before allocating, so a hostile request
// cannot make it allocate more than its own size suggests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kiln/tensor.h"

namespace kiln::serve::kserve {

/// The element count of `shape`; throws for a negative dimension or a count past int64.
/// `what` names the tensor in the message ("input 'x'").
int64_t checked_numel(const Shape& shape, const std::string& what);

/// A tensor of `dtype` and `shape` from a JSON "data" value: an array (possibly nested) of
/// booleans, integers in the dtype's range, numbers, or strings (BYTES), with exactly numel
/// elements.
Tensor tensor_from_json(const std::string& what, DType dtype, const Shape& shape, const nlohmann::json& data);

/// A tensor from its binary encoding, which must be exactly `bytes`.
Tensor tensor_from_binary(const std::string& what, DType dtype, const Shape& shape, std::string_view bytes);

/// The flat JSON "data" array of a tensor (FP16/BF16 as numbers).
nlohmann::ordered_json tensor_to_json(const Tensor& t);

/// Appends the binary encoding of `t` to `out`; returns how many bytes it appended.
size_t append_tensor_binary(const Tensor& t, std::string& out);

}  // namespace kiln::serve::kserve
