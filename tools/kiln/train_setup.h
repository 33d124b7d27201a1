// What `kiln train` and `kiln inspect --memory --train` share: binding the model's batch
// dimension to the batch size, and reading byte counts ("512M") from the command line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::cli {

/// Binds the batch dimension (dim 0 of the model's first input, `model_inputs[0]`) to
/// `batch_size` in `dims`: a
/// symbolic batch dim gets its symbol bound (a value already given for it in `dims` must agree);
/// a fixed batch dim must equal `batch_size`. kInvalidArgument, naming the input, otherwise.
/// Returns the symbol ("" when the dim is fixed).
std::string bind_batch_dim(const std::vector<TensorInfo>& model_inputs, int64_t batch_size,
                           std::map<std::string, int64_t>& dims);

/// "1048576", "512K", "64M", "2G" (binary multiples) -> bytes; kInvalidArgument naming `option`.
size_t parse_bytes(const std::string& text, const std::string& option);

}  // namespace kiln::cli
