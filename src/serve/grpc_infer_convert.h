// Converting KServe v2 gRPC inference messages (inference.ModelInferRequest / ModelInferResponse)
// to and from the server's InferRequest / InferResponse.
//
// Inputs come either all in raw_input_contents (one entry per input, in input order: little-endian
// elements without padding, BYTES elements as a 4-byte little-endian length and the bytes) or each
// in its typed InferTensorContents field (fp32_contents, int64_contents, bytes_contents, ...).
// Outputs always go back in raw_output_contents, as Triton sends them. Request parameters:
// "priority" (0 = the model's default, 1 = real time, >1 = best effort) and "timeout"
// (microseconds, 0 = none); sequence-batching parameters are rejected (Kiln has no sequence
// batcher); other parameters are ignored, as Triton leaves them to the backend.
#pragma once

#include "serve/proto/grpc_service.pb.h"
#include "serve/types.h"

namespace kiln::serve {

/// Fills `out` (model, version, id, inputs, requested outputs, priority, timeout) from `in`.
/// kInvalidArgument naming the model and the input, with expected vs got, for a malformed
/// request (unknown datatype, a shape that does not match the data, contents in the wrong field).
Failure infer_request_from_grpc(const inference::ModelInferRequest& in, InferRequest& out);

/// Fills `out` from `in`, each output's bytes in raw_output_contents. kInternal for an output
/// whose dtype KServe v2 cannot carry.
Failure infer_response_to_grpc(const InferResponse& in, inference::ModelInferResponse& out);

}  // namespace kiln::serve
