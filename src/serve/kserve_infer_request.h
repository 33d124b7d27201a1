// Parsing a KServe v2 HTTP/REST inference request body into a serve::InferRequest: the JSON
// request object (id, parameters, inputs, outputs) and, with the binary tensor data extension,
// the inputs' raw bytes after it. Request parameters Kiln reads: "priority" (0 = the model's
// default, 1 = real-time, >1 = best effort; or the strings "realtime" / "best_effort"),
// "timeout" (microseconds; 0 = none), "binary_data_output"; other parameters are ignored.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "serve/types.h"

namespace kiln::serve::kserve {

/// How the response carries each output: binary when its request entry says "binary_data":
/// true, else the request-level "binary_data_output" (false when absent).
struct OutputEncoding {
    bool binary_default = false;
    std::map<std::string, bool> binary;  // the outputs that said "binary_data" explicitly
    bool binary_for(const std::string& name) const {
        auto it = binary.find(name);
        return it == binary.end() ? binary_default : it->second;
    }
};

struct ParsedInferRequest {
    InferRequest request;  // model and version are left to the caller (they come from the URL)
    OutputEncoding encoding;
};

/// Reads the value of the Inference-Header-Content-Length header (a decimal byte count).
Failure parse_header_length(std::string_view value, size_t& out);

/// Parses a request body. Without `header_length` the whole body is the JSON object; with it,
/// the first header_length bytes are, and the rest is the binary data of the inputs that carry
/// a "binary_data_size" parameter, in input order, with nothing left over. Never throws: a bad
/// request is kInvalidArgument with a message naming what was wrong (which input, expected vs
/// got).
Failure parse_infer_request(std::string_view body, std::optional<size_t> header_length, ParsedInferRequest& out);

}  // namespace kiln::serve::kserve
