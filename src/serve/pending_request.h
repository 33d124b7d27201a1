// A request accepted into a model's queue: the validated request, its callback, and what the
// batcher needs (class, deadline, rows, the shape that decides which requests batch together).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/types.h"

namespace kiln::serve {

using Clock = std::chrono::steady_clock;

struct PendingRequest {
    InferRequest request;
    InferCallback done;
    Priority priority = Priority::kBestEffort;
    Clock::time_point arrival;
    std::optional<Clock::time_point> deadline;
    /// Inputs in the config's input order, as the model sees them (a config reshape applied).
    std::vector<Tensor> inputs;
    /// Rows along the batch dimension (1 for a model that does not batch).
    int64_t rows = 1;
    /// Every input's dims after the batch dimension: requests batch together only when equal.
    std::string batch_key;
};

}  // namespace kiln::serve
