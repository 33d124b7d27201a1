// The gradient averaging of pipeline and data parallelism together (pipeline_parallel.h,
// pipeline_groups.h): a stage's gradients summed over the step's microbatches are averaged
// across the stage's replicas in buckets, as data-parallel training's (data_parallel.h): buckets
// of at most DataParallelOptions::bucket_bytes in reverse parameter order (the order the backward
// pass writes them), the loss stage's loss (f64) in the last bucket. Each bucket's non-blocking
// mean allreduce (bucket_launcher.h) starts as soon as its gradient sums are final, which the
// step's last backward reports while it still runs (PipelineStage::backward's `on_sum`), so the
// allreduces overlap the rest of that backward. One agreement check, at the first step, covers
// every bucket: replicas whose stages differ are an error naming the rank and the tensor.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/bucket_launcher.h"
#include "distributed/data_parallel.h"
#include "distributed/pipeline_stage.h"

namespace kiln::distributed {

class ReplicaGradients {
public:
    /// `replicas`: the ranks holding this stage in every replica; `stage`'s parameters (model
    /// order) and whether it computes the loss are the plan. `opts`: bucket_bytes, overlap,
    /// comm_thread, compute_threads (DataParallelOptions::from_env, `--bucket-mb`, `--no-overlap`).
    ReplicaGradients(Communicator& replicas, const PipelineStage& stage, const DataParallelOptions& opts);
    ~ReplicaGradients();

    /// Whether there is anything to average (no parameters and no loss: nothing, no collective).
    bool empty() const { return buckets_.empty(); }
    /// Before the step's last backward: starts a step's buckets.
    void begin();
    /// The callback for the step's last backward (PipelineStage::backward's `on_sum`); null
    /// without overlap.
    const PipelineStage::GradientReady* on_sum() const { return opts_.overlap ? &on_sum_ : nullptr; }
    /// After the step's last backward: puts what was not reported yet (`sums`, the stage's
    /// gradients, and the loss on the loss stage), waits for every bucket; `sums` and `*loss`
    /// are then the replicas' means.
    void finish(std::map<std::string, Tensor>& sums, double* loss);
    /// The buckets, and how many of the last step's started before the stage's last gradient sum
    /// was reported (while its last backward still ran: the overlap).
    size_t buckets() const { return buckets_.size(); }
    size_t started_during_backward() const { return started_during_backward_; }

private:
    Communicator& comm_;
    DataParallelOptions opts_;
    bool loss_ = false;
    std::vector<std::vector<std::string>> buckets_;
    std::map<std::string, std::pair<size_t, size_t>> slot_;  // parameter -> (bucket, position)
    std::vector<std::string> descriptions_;
    bool checked_ = false;
    std::unique_ptr<BucketLauncher> launcher_;
    PipelineStage::GradientReady on_sum_;
    size_t started_during_backward_ = 0;
};

}  // namespace kiln::distributed
