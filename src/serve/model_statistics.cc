// Per model version statistics (model_statistics.h).
#include "serve/model_statistics.h"

namespace kiln::serve {
namespace {

void add(DurationStat& s, std::chrono::nanoseconds d) {
    ++s.count;
    s.ns += static_cast<uint64_t>(d.count());
}

}  // namespace

ModelStatisticsRecorder::ModelStatisticsRecorder(std::string name, std::string version) {
    stats_.name = std::move(name);
    stats_.version = std::move(version);
}

void ModelStatisticsRecorder::success(std::chrono::nanoseconds total, std::chrono::nanoseconds queue,
                                      std::chrono::nanoseconds input, std::chrono::nanoseconds infer,
                                      std::chrono::nanoseconds output) {
    std::lock_guard<std::mutex> lock(mu_);
    add(stats_.success, total);
    add(stats_.queue, queue);
    add(stats_.compute_input, input);
    add(stats_.compute_infer, infer);
    add(stats_.compute_output, output);
    ++stats_.inference_count;
    stats_.last_inference_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         std::chrono::system_clock::now().time_since_epoch())
                                                         .count());
}

void ModelStatisticsRecorder::failure(std::chrono::nanoseconds total) {
    std::lock_guard<std::mutex> lock(mu_);
    add(stats_.fail, total);
}

void ModelStatisticsRecorder::execution(int64_t batch_size, std::chrono::nanoseconds input,
                                        std::chrono::nanoseconds infer, std::chrono::nanoseconds output) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.execution_count;
    BatchStat& b = batches_[static_cast<uint64_t>(batch_size)];
    b.batch_size = static_cast<uint64_t>(batch_size);
    add(b.compute_input, input);
    add(b.compute_infer, infer);
    add(b.compute_output, output);
}

ModelStatistics ModelStatisticsRecorder::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    ModelStatistics s = stats_;
    for (const auto& [size, b] : batches_) s.batch_stats.push_back(b);
    return s;
}

}  // namespace kiln::serve
