// Checking an inference request against a model version's configuration before it is queued:
// every input given once and known, its datatype and shape (the batch dimension within
// max_batch_size, the same in every input), the model's symbolic dimensions consistent, the
// requested outputs known. Failures are kInvalidArgument naming the model, the input, expected
// vs got.
#pragma once

#include <vector>

#include "kiln/session.h"
#include "model_config.pb.h"
#include "serve/model_config.h"
#include "serve/pending_request.h"

namespace kiln::serve {

/// Moves the request's inputs into `out.inputs` in the model's input order (a config reshape
/// applied) and sets rows and batch_key. `model_inputs`: the model's own inputs (Session order).
Failure validate_request(InferRequest& request, const inference::ModelConfig& config,
                         const std::vector<TensorInfo>& model_inputs, PendingRequest& out);

}  // namespace kiln::serve
