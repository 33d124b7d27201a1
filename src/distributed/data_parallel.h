// Data-parallel training over MPI (`mpirun -np N kiln train ... --data-parallel`,
// docs/distributed.md), as Horovod and PyTorch DDP do it: every rank holds the whole model,
// trains on its own shard of each global batch, and the ranks' gradients are averaged before
// every optimizer step, so all ranks keep identical weights.
//
// A step: the session's gradients on this rank's batch, the mean allreduce of the gradients in
// buckets of about bucket_bytes taken in reverse parameter order (the order backward produces
// them), then the optimizer (TrainingSession::apply_gradients). The mean of per-rank mean losses
// over equal batches is the global batch's mean loss, so N ranks x batch B step as one process
// x batch N*B does; the loss rides in the last bucket.
//
// Overlap with the backward pass (DDP's): the session reports each gradient as soon as the
// runtime has written it for good (TrainingSession::gradients_as_ready, runtime/output_ready.h),
// and a bucket is ready once its last gradient is in. Where the node has a core to spare
// (DataParallelOptions::comm_thread), a communication thread runs each ready bucket's blocking
// mean allreduce while the rest of the backward pass runs; elsewhere the buckets run after the
// backward pass, on the step's thread (bucket_launcher.h). Buckets start strictly in bucket order, so
// every rank issues the same collectives in the same order whatever order its executor finished
// them in. The optimizer waits for every bucket. One agreement check per step covers every
// bucket (the same names, dtypes and shapes on every rank) before any of them starts.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/sync_batch_norm_gradients.h"
#include "kiln/tensor.h"
#include "kiln/training.h"

namespace kiln::distributed {

struct DataParallelOptions {
    /// Bytes of gradients per allreduce call (DDP's bucket_cap_mb, 25 MB there). Small buckets
    /// start early, overlapping the backward pass; each costs one more MPI call
    /// (KILN_DIST_BUCKET_MB, `kiln train --bucket-mb`).
    size_t bucket_bytes = size_t{4} << 20;
    /// Start buckets while the backward pass runs (KILN_DIST_OVERLAP=0 turns it off: every
    /// bucket then starts after the last gradient, as before; results are the same bit for bit).
    bool overlap = true;
    /// Run the buckets' allreduces on a communication thread while the backward pass goes on
    /// (bucket_launcher.h): 1, or 0 (on the step's thread after the backward pass), or -1 (auto:
    /// only where the node has a core to spare, more cores than its ranks' compute threads; on
    /// a fully used machine the thread takes its CPU time from the backward pass, and a
    /// 2-rank x 1-thread step on 2 cores was 8-10% slower with it). KILN_DIST_COMM_THREAD.
    int comm_thread = -1;
    /// Intra-op threads of each rank's step, for comm_thread's auto (0: unknown, taken as every
    /// core).
    int compute_threads = 0;
    /// BatchNormalization statistics over the global batch (every rank's), as PyTorch's
    /// SyncBatchNorm (sync_batch_norm_gradients.h; `kiln train --sync-batch-norm`). Off: each
    /// rank normalizes with its own batch's statistics (DDP's default). No effect on a model
    /// without BatchNormalization.
    bool sync_batch_norm = false;
    /// Benchmarks only: skip the gradient allreduce (the ranks' weights then drift apart), to
    /// measure the step without communication (KILN_DIST_BENCH_NO_ALLREDUCE=1).
    bool skip_allreduce = false;

    /// The defaults, overridden by the environment variables above.
    static DataParallelOptions from_env();
    /// comm_thread resolved for a job on `comm` (its node's ranks: Communicator::local_size).
    bool use_comm_thread(const Communicator& comm) const;
};

/// What the last step did (for tests, logs and benchmarks).
struct DataParallelStepStats {
    int buckets = 0;
    /// Buckets whose allreduce started while the backward pass still had gradients to write
    /// (inside the session's run, before its last gradient was reported): the overlap.
    int started_during_backward = 0;
    /// Per bucket, how many gradients had been reported when it started.
    std::vector<int> reported_at_start;
    int gradients = 0;
    double backward_s = 0;  // gradients_as_ready / gradients
    double wait_s = 0;      // after the backward pass, until every bucket was reduced
    int synchronized_batch_norms = 0;  // BatchNormalization nodes with global statistics
};

class DataParallel {
public:
    /// Binds `session` (kept by the caller) to the ranks of `comm`. With sync_batch_norm, every
    /// rank must construct it alike (it compiles the synchronized gradients graph).
    DataParallel(Communicator& comm, TrainingSession& session, DataParallelOptions opts = DataParallelOptions::from_env());
    ~DataParallel();

    /// Copies rank 0's parameters to every rank (the start of a run from the model's weights).
    void broadcast_parameters();
    /// One optimizer step on this rank's batch (see above); returns the mean loss over ranks.
    double step(const std::map<std::string, Tensor>& batch);
    /// The buckets, in the order they start, each a list of tensor names ("grad/fc.weight";
    /// "loss" in the last), made at the first step (for tests and logs).
    const std::vector<std::vector<std::string>>& buckets() const { return buckets_; }
    const DataParallelStepStats& last_step_stats() const { return stats_; }
    const DataParallelOptions& options() const { return opts_; }

    struct StepRun;

private:
    void plan_buckets();

    Communicator& comm_;
    TrainingSession& session_;
    DataParallelOptions opts_;
    std::vector<std::vector<std::string>> buckets_;
    std::vector<std::string> descriptions_;  // the agreement check's: "bucket 0: grad/w f32[3,4]"
    std::map<std::string, std::pair<size_t, size_t>> slot_;  // parameter -> (bucket, position)
    std::unique_ptr<SyncBatchNormGradients> sync_bn_;         // with sync_batch_norm
    DataParallelStepStats stats_;
};

}  // namespace kiln::distributed
