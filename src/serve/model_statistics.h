// Triton's statistics extension for one model version: counts and cumulative durations of
// successes, failures, queueing and the compute phases, per batch size. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>

#include "serve/types.h"

namespace kiln::serve {

class ModelStatisticsRecorder {
public:
    ModelStatisticsRecorder(std::string name, std::string version);
    /// One request of `rows` batch rows (1 for a model without batching) answered with a result:
    /// its whole time, its queue time and its batch's phases. inference_count counts rows, as
    /// Triton's statistics extension does.
    void success(int64_t rows, std::chrono::nanoseconds total, std::chrono::nanoseconds queue, std::chrono::nanoseconds input,
                 std::chrono::nanoseconds infer, std::chrono::nanoseconds output);
    void failure(std::chrono::nanoseconds total);
    /// One model execution of `batch_size` rows.
    void execution(int64_t batch_size, std::chrono::nanoseconds input, std::chrono::nanoseconds infer,
                   std::chrono::nanoseconds output);
    ModelStatistics snapshot() const;

private:
    mutable std::mutex mu_;
    ModelStatistics stats_;
    std::map<uint64_t, BatchStat> batches_;
};

}  // namespace kiln::serve
