// The ONNX model's own initializers, for training: which names the model holds as initializers
// (its candidate parameters), and the model written back with some initializers replaced
// (TrainingSession::export_onnx: the original graph with the trained values).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/tensor.h"

namespace kiln::frontend {

/// The names of the main graph's initializers, in model order. kIOError / kInvalidModel when the
/// file cannot be read or parsed.
std::vector<std::string> onnx_initializer_names(const std::string& path);

/// The serialized ModelProto of `path` with each initializer named in `values` replaced by that
/// tensor (raw data; its dtype and shape must be the initializer's, else kInvalidArgument naming
/// it). A name that is no initializer is kInvalidArgument. Initializers kept from external data
/// files are embedded, so the result stands alone.
std::string onnx_with_initializers(const std::string& path, const std::map<std::string, Tensor>& values);

}  // namespace kiln::frontend
