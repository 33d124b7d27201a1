// TensorProto -> kiln::Tensor, and the ONNX type helpers the importer shares.
#pragma once

#include <optional>
#include <string>

#include <onnx/onnx_pb.h>

#include "support/tensor.h"

namespace kiln::frontend {

/// ONNX TensorProto.DataType name ("FLOAT", "STRING", ...; "type 19" for values this protobuf
/// version does not know).
std::string onnx_type_name(int onnx_type);

/// Converts a TensorProto: raw_data, the typed fields (float_data, int32_data -- which also
/// carries f16/bf16 bit patterns, 8/16-bit ints and bool --, int64_data, double_data,
/// uint64_data) or external data (location/offset/length resolved relative to `base_dir` and
/// required to stay inside it), or string_data for strings. Sizes are validated; a mismatch is
/// kInvalidModel, a type Kiln lacks (complex) is kUnsupported. `what` names the tensor in messages
/// ("initializer 'w'").
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                         const std::string& what);

/// Reads a whole file into a string; kIOError if it cannot be read.
std::string read_file_bytes(const std::string& path);

}  // namespace kiln::frontend
