// Pipeline-parallel training over MPI, the public face of the distributed layer's pipeline
// (docs/distributed.md, "Pipeline-parallel training"): the model is split into stages, one per
// rank of a pipeline, and each step's batch into microbatches whose activations and gradients
// travel between the stages; with data parallelism the job's ranks form several replicas of
// the pipeline, each on its own part of the global batch, whose stage gradients are averaged
// before the update. What `mpirun -np N kiln train --pipeline-parallel` runs; the Python
// package wraps it as its PipelineParallel class.
// Implemented by the kiln_distributed library (it brings MPI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/tensor.h"

namespace kiln {

struct TrainingOptions;  // kiln/training.h
struct StepResult;

/// How a PipelineTrainer splits the job and schedules a step.
struct PipelineTrainerOptions {
    /// Microbatches per step (GPipe's M); must divide the replica's batch.
    int microbatches = 1;
    /// "gpipe" (every microbatch's forward, then every backward) or "1f1b" (PipeDream-flush: at
    /// most as many microbatches stashed as stages).
    std::string schedule = "gpipe";
    /// Annotated stages: training-graph node name -> stage; empty: the cost-balanced split.
    std::map<std::string, int> stages;
    /// Recompute each stage's forward in its backward instead of stashing it (GPipe's
    /// re-materialisation).
    bool rematerialize = false;
    /// Stages per pipeline: 0 = every rank of the job is a stage (one pipeline). With
    /// data_parallel, the job's ranks are ranks / pipeline_stages replicas of the pipeline.
    int pipeline_stages = 0;
    bool data_parallel = false;
    /// With data_parallel: bytes of stage gradients per allreduce; 0: the default (4 MB, or
    /// KILN_DIST_BUCKET_MB).
    size_t bucket_bytes = 0;
};

/// The last step on this rank, in seconds (compute; the rest of step_s waits for other stages).
struct PipelineTrainerStats {
    double step_s = 0, forward_s = 0, backward_s = 0, apply_s = 0;
    /// The most microbatches stashed at once on this rank.
    int peak_stashed = 0;
};

class PipelineTrainer {
public:
    /// Every rank of the MPI job calls it with the same arguments. `opts.session.dims` binds the
    /// replica's batch (the leading dim of the model's first input must be symbolic). Errors:
    /// kInvalidArgument for one rank, microbatches not dividing the batch, pipeline_stages not
    /// dividing the ranks (or below 2, or other than the job's size without data_parallel), an
    /// unknown schedule; kUnsupported for opts.recompute (rematerialize is the pipeline's).
    PipelineTrainer(const std::string& onnx_path, const TrainingOptions& opts, const PipelineTrainerOptions& popts);
    ~PipelineTrainer();
    PipelineTrainer(const PipelineTrainer&) = delete;
    PipelineTrainer& operator=(const PipelineTrainer&) = delete;

    /// The replica's batch inputs: the model's inputs and the labels.
    const std::vector<TensorInfo>& batch_inputs() const;
    /// One step on the replica's batch (the same on every stage of a replica); returns the mean
    /// loss over the global batch (every replica's), on every rank.
    double step(const std::map<std::string, Tensor>& batch);
    /// Forward and loss only (no update), through the stages. The loss on every rank; the model
    /// output the loss reads, joined over the microbatches, on the last stage only.
    StepResult eval_step(const std::map<std::string, Tensor>& batch);
    int64_t steps() const;

    int stage() const;
    int stages() const;
    int replica() const;
    int replicas() const;
    /// One line per stage: its rank, nodes, parameters and estimated cost.
    const std::string& describe() const;
    /// This rank's stage's parameter names.
    std::vector<std::string> stage_parameter_names() const;
    /// Every stage's parameters on the first stage of each replica (empty elsewhere). Every rank
    /// calls it.
    std::map<std::string, Tensor> gather_parameters();
    /// World rank 0 writes the trained model as ONNX / a checkpoint (TrainingSession's format,
    /// loadable by any split or by one process). Every rank calls them.
    void export_onnx(const std::string& path);
    void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra = {});
    /// Every rank reads its stage's tensors and the step count; returns the checkpoint's extra.
    std::map<std::string, std::string> load_checkpoint(const std::string& path);
    PipelineTrainerStats last_step_stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
