// Writing a serve::InferResponse as a KServe v2 HTTP/REST response body: the JSON response
// object (model_name, model_version, id, outputs), with each output's data either inline as a
// JSON array or, with the binary tensor data extension, after the JSON (the output then carries
// the parameter "binary_data_size" and the HTTP response the Inference-Header-Content-Length
// header).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "serve/kserve_infer_request.h"
#include "serve/types.h"

namespace kiln::serve::kserve {

struct EncodedResponse {
    std::string body;
    /// Set when some output is binary: the length of the JSON part of the body.
    std::optional<size_t> header_length;
};

/// Encodes `response`; kInternal when an output has a dtype the protocol cannot carry.
Failure write_infer_response(const InferResponse& response, const OutputEncoding& encoding, EncodedResponse& out);

}  // namespace kiln::serve::kserve
