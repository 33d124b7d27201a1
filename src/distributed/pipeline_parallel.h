// Pipeline-parallel training over MPI (`mpirun -np N kiln train ... --pipeline-parallel`,
// docs/distributed.md), GPipe's schedule: the model is split into N stages, one per rank
// (pipeline_stage_graph.h: the partition's annotated or cost-balanced split), and each step's
// global batch into M microbatches.
//
// A step t on rank r (every rank is given the same global batch and reads what its stage reads):
//  - r < N-1: the forward of microbatches 0..M-1 in turn, each sending its activations on as
//    soon as it is done (the rendezvous' sends never block, so rank r+1 works on microbatch m
//    while r runs m+1), keeping each microbatch's stash (the forward values its backward reads);
//    then the backward of microbatches 0..M-1, each waiting for the gradients of the
//    activations it sent, reading its stash (or, with `rematerialize`, computing its forward
//    again from the activations it received: GPipe's re-materialisation), and sending the
//    gradients of the activations it received back.
//  - r = N-1 (the loss stage): for each microbatch as it arrives, forward, the loss, backward.
//  - PipelineSchedule::kOneForwardOneBackward (1F1B, PipeDream-flush) reorders the first
//    bullet: rank r runs N-1-r forwards ahead, then one forward and one backward in turn, then
//    the backwards left. The bubble is GPipe's, but a stage holds at most N-r microbatches'
//    stashes instead of M. The backwards still run in microbatch order: the same sums.
//  - every rank: its parameters' gradients summed over the microbatches (each microbatch's loss
//    seeded by 1/M, so the sum is the gradient of the global batch's mean loss), then the
//    optimizer on the parameters it owns, once per step. The loss (the microbatches' mean) goes
//    from the last rank to every rank. With clipping (clip_norm), each rank sends every other
//    its stage's sum of squared gradients, every rank adds them in rank order (the same double
//    on every rank) into the global norm, and scales its own gradients by clip_grad_norm_'s
//    factor inside its update.
// Checkpoints (pipeline_checkpoint.h): rank 0 gathers every stage's parameters and optimizer
// state and writes one file in TrainingSession's format and names; every rank reads it back.
// Transfers are the rendezvous' (rendezvous.h) under the partition's keys with the step set to
// t and the iteration to the microbatch: "0/1 -> 1 'h1' frame 0:3 step 7" is microbatch 3's
// activation h1 of step 7, and its gradient travels back as "1/1 -> 0 'grad/h1' frame 0:3 step 7".
// A lost rank is the heartbeat's (communicator.h): every wait is a receive with a deadline.
//
// Master dispatch (PipelineDispatch::kMaster): rank 0 of the pipeline, the master, alone reads
// the model. It builds every stage's plan (pipeline_plan.h) and ships each worker its own
// (pipeline_plan_shipping.h) before compiling its stage; a worker compiles what it receives and
// then serve()s the master's orders until told to stop, never reading the model, the data or a
// checkpoint file. Each public call on the master (step, eval_step, save_checkpoint,
// load_checkpoint, gather_parameters, export_onnx) orders the workers to do their part: an
// order "order" (0 -> w, step n: f64[2] {kind, argument}, the learning rate of a step) with, for
// a step or an evaluation, the batch inputs the worker's graphs read ("input:NAME", whole: the
// worker cuts them into microbatches). Steps are ordered ahead: enqueue(batch) posts a step's
// orders at once (non-blocking sends) and step() runs the oldest enqueued, so the master can
// order step i+1 before step i ends and a worker finds its next order waiting. The loss stage
// sends evaluation results to the master, which alone holds them (eval_step returns them on
// rank 0, from_loss_stage is the master's own values). A worker that fails (its compile, a step)
// sends the master its message ("error", w -> 0), and the master's next wait ends with
// `worker rank 1 failed: ...`; should the master not be waiting, the worker rethrows after 5 s.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "distributed/pipeline_plan.h"
#include "distributed/pipeline_stage.h"
#include "distributed/rank_assignment.h"
#include "distributed/rendezvous.h"
#include "distributed/replica_gradients.h"
#include "kiln/session.h"
#include "kiln/training.h"

namespace kiln::distributed {

/// The order of a step's forwards and backwards on a stage.
enum class PipelineSchedule {
    kGPipe,                  // every microbatch's forward, then every backward
    kOneForwardOneBackward,  // 1F1B (PipeDream-flush): at most N microbatches stashed, not M
};

/// Who reads the model (file comment).
enum class PipelineDispatch {
    kReplicated,  // every rank reads the model and builds its own stage
    kMaster,      // rank 0 builds every stage and ships it; the other ranks serve() its orders
};

struct PipelineParallelOptions {
    /// Microbatches per step (GPipe's M); must divide the global batch.
    int microbatches = 1;
    /// Annotated stages (`--stage NODE=RANK`, names of the training graph's nodes); empty, with
    /// no node carrying kiln.rank: the cost-balanced split.
    StageMap stages;
    /// Recompute each stage's forward in its backward instead of keeping the forward's values
    /// of every microbatch until its backward (pipeline_stage_graph.h): less memory, more work.
    bool rematerialize = false;
    PipelineSchedule schedule = PipelineSchedule::kGPipe;
    /// Data parallelism: the ranks holding this rank's stage in every replica, ranked by replica
    /// (PipelineGroups::replicas_of_stage), which must outlive the pipeline; null for one replica.
    /// Every replica starts from the model file's initializers (the same on every rank). Replica
    /// 0 alone writes checkpoints and the export; every replica loads a checkpoint.
    Communicator* replicas = nullptr;
    /// With replicas: the gradient buckets' size, whether they start during the step's last
    /// backward (overlap), the progress thread's period (replica_gradients.h).
    DataParallelOptions replica_buckets = DataParallelOptions::from_env();
    /// kMaster: rank 0 (of each replica's pipeline) reads the model; the others ignore the path.
    PipelineDispatch dispatch = PipelineDispatch::kReplicated;
};

/// Seconds of the last step on this rank.
struct PipelineStepStats {
    double step_s = 0;
    double forward_s = 0, backward_s = 0, apply_s = 0;  // compute; the rest is waiting (the bubble)
    /// The most microbatches whose forward had run and backward had not, at once (0 on the
    /// loss stage, which runs both together): M under GPipe, at most N-r under 1F1B.
    int peak_stashed = 0;
    /// The global gradient norm over every stage before clipping (0 without clip_norm).
    double grad_norm = 0;
    /// With replicas: the stage's gradient buckets, and how many started during its last backward.
    int replica_buckets = 0, replica_buckets_started_early = 0;
};

class PipelineParallel {
public:
    /// Every rank of `comm` calls it with the same arguments. `opts.session.dims` binds the
    /// global batch: the leading dim of the model's first input must be symbolic, and every
    /// input dim with that symbol is the batch. Refused with kUnsupported (naming the option):
    /// recompute (PipelineParallelOptions::rematerialize is the pipeline's); with
    /// kInvalidArgument: M not dividing the batch, one rank, and the stage errors of
    /// pipeline_stage_graph.h.
    PipelineParallel(Communicator& comm, const std::string& onnx_path, const TrainingOptions& opts,
                     const PipelineParallelOptions& popts);
    ~PipelineParallel();
    PipelineParallel(const PipelineParallel&) = delete;
    PipelineParallel& operator=(const PipelineParallel&) = delete;

    /// The global batch's inputs: the model's inputs and the labels (as
    /// TrainingSession::batch_inputs() at the global batch).
    const std::vector<TensorInfo>& batch_inputs() const { return batch_inputs_; }
    /// One GPipe step on the global batch (the same on every rank; the master's alone under master
    /// dispatch); returns the batch's mean loss. Nothing may be enqueued.
    double step(const std::map<std::string, Tensor>& batch);
    /// Queues the step on `batch` (checked here); a master orders it from its workers at once.
    void enqueue(const std::map<std::string, Tensor>& batch);
    /// Runs the oldest enqueued step; returns its loss.
    double step();
    size_t enqueued() const { return queued_.size(); }
    /// A worker under master dispatch: runs the master's orders until it says stop. An error is
    /// reported to the master and rethrown after a grace period.
    void serve();
    /// The master: orders the workers to stop (the destructor does it otherwise).
    void stop();
    bool is_master() const { return popts_.dispatch == PipelineDispatch::kMaster && comm_.rank() == 0; }
    bool is_worker() const { return popts_.dispatch == PipelineDispatch::kMaster && comm_.rank() != 0; }
    /// Steps done.
    int64_t steps() const { return step_; }
    /// Evaluates the global batch `batch` (the same on every rank; as step's, no update): each
    /// microbatch's forward through the stages (the eval graphs, pipeline_stage_graph.h). On the
    /// last rank: the microbatches' mean loss and the model output the loss reads, joined over
    /// the microbatches (no output when it is a scalar: `--loss output`); nothing elsewhere.
    std::optional<StepResult> eval_step(const std::map<std::string, Tensor>& batch);
    /// `values` of the last rank (the loss stage), on every rank. Every rank calls it.
    std::vector<double> from_loss_stage(const std::vector<double>& values);

    /// Every trained parameter of the model (all stages), model order.
    const std::vector<std::string>& parameter_names() const { return params_; }
    /// The parameters of this rank's stage.
    const PipelineStage& stage() const { return *stage_; }
    /// Every stage's parameters, on rank 0 of each replica's pipeline (empty elsewhere). Every
    /// rank calls it.
    std::map<std::string, Tensor> gather_parameters();
    /// Rank 0 (of replica 0) writes the model with every stage's trained parameters as ONNX.
    /// Every rank calls it.
    void export_onnx(const std::string& path);
    /// Rank 0 gathers every stage's parameters and optimizer state and writes them, the step
    /// count and `extra` (plus the split: pipeline_checkpoint.h) to `path` atomically. Every rank
    /// calls it; the others send their stage's tensors and return (the other replicas at once:
    /// their state is replica 0's).
    void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra);
    /// Every rank reads `path` (a checkpoint of this model and optimizer, written by a pipeline of
    /// any split or by TrainingSession) and takes its stage's tensors and the step count; it
    /// copies only those out of the file (checkpoint_names(); the others' types are checked);
    /// returns its `extra`. kInvalidArgument naming the tensor when the checkpoint does not fit
    /// the whole model (the same on every rank), kIOError/kInvalidModel for an unreadable file.
    std::map<std::string, std::string> load_checkpoint(const std::string& path);
    /// The checkpoint names of this rank's stage's tensors: "param:<name>" and "state:opt/...".
    std::set<std::string> checkpoint_names() const;
    /// The stage split as a checkpoint records it (pipeline_checkpoint.h's stage_split_text).
    const std::string& stage_split() const { return split_; }
    /// One line per stage: its rank, nodes, parameters and estimated cost.
    const std::string& describe() const { return describe_; }
    const PipelineStepStats& last_step_stats() const { return stats_; }
    const PipelineParallelOptions& options() const { return popts_; }

private:
    using Values = std::map<std::string, Tensor>;
    enum Order { kStop = 0, kStep, kEval, kSave, kLoad, kGather };
    void init(PipelinePlan plan);
    double run_step(const std::map<std::string, Tensor>& batch, double lr);
    /// The master: sends every worker order `kind` (with the batch inputs it reads); returns its number.
    int64_t order(Order kind, double arg, const std::map<std::string, Tensor>* batch = nullptr);
    void check_workers();
    [[noreturn]] void report_failure();
    void receive_checkpoint(int64_t step, int64_t order);
    /// The master's --resume: orders the load, then reads and sends each worker its stage's tensors.
    void send_checkpoint(const std::string& path, int64_t step);
    std::optional<StepResult> eval_result(std::optional<StepResult> own);
    double loss_stage_step(const std::vector<Values>& micro);
    void inner_stage_step(const std::vector<Values>& micro);
    void forward_microbatch(const Values& micro, Values& kept, int64_t m);
    void backward_microbatch(const Values& micro, Values& kept, int64_t m);
    Values receive_inputs(int64_t m);
    Values receive_seeds(int64_t m);
    void send_outputs(const std::vector<Tensor>& outs, int64_t m);
    void send_input_grads(const Values& grads, int64_t m);
    double clip_factor();
    void average_over_replicas(double* loss);
    /// The step's last backward's `on_sum` (null without replicas or overlap).
    const PipelineStage::GradientReady* last_backward_reports() const;
    /// Whether this rank's replica writes checkpoints and exports (replica 0).
    bool writes() const { return popts_.replicas == nullptr || popts_.replicas->rank() == 0; }
    std::vector<Values> microbatches(const std::map<std::string, Tensor>& batch) const;
    void check_batch(const std::map<std::string, Tensor>& batch) const;

    Communicator& comm_;
    std::string path_;
    TrainingOptions opts_;
    PipelineParallelOptions popts_;
    std::vector<TensorInfo> batch_inputs_;
    std::set<std::string> batched_;  // the batch inputs cut into microbatches (the rest go whole)
    std::vector<std::string> params_;
    std::vector<std::vector<std::string>> stage_params_;  // per rank
    std::map<std::string, std::pair<DType, Shape>> param_types_;  // every stage's parameters
    std::string split_;
    int64_t checkpoints_ = 0;  // saved so far: the iteration of their transfers' keys
    int64_t eval_batches_ = 0;  // evaluated so far: the frame of their transfers' keys
    int64_t shared_ = 0;        // from_loss_stage calls so far
    double grad_norm_ = 0;
    std::unique_ptr<PipelineStage> stage_;
    std::unique_ptr<ReplicaGradients> replica_grads_;  // null for one replica
    std::unique_ptr<Rendezvous> rv_;
    std::string describe_;
    PipelineStepStats stats_;
    int peak_stashed_ = 0;
    int64_t step_ = 0;
    // Master dispatch.
    std::set<std::string> stage_inputs_;                 // the batch inputs this stage's graphs read
    std::vector<std::set<std::string>> worker_inputs_;   // the master's: per rank (0's unused)
    std::vector<std::vector<std::string>> worker_names_;  // the master's: per rank, its checkpoint names
    std::deque<std::map<std::string, Tensor>> queued_;   // enqueued steps' batches
    int64_t next_order_ = 0;
    bool stopped_ = false;
};

}  // namespace kiln::distributed
