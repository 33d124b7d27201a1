// Data-parallel training over MPI (`mpirun -np N kiln train ... --data-parallel`,
// docs/distributed.md), as Horovod and PyTorch DDP do it: every rank holds the whole model,
// trains on its own shard of each global batch, and the ranks' gradients are averaged before
// every optimizer step, so all ranks keep identical weights.
//
// A step: the session's gradients on this rank's batch (TrainingSession::gradients), the mean
// allreduce of the gradients in buckets of about bucket_bytes taken in reverse parameter order
// (the order backward produces them; the loss rides in the first bucket), then the optimizer
// (TrainingSession::apply_gradients). The mean of per-rank mean losses over equal batches is the
// global batch's mean loss, so N ranks x batch B step as one process x batch N*B does.
//
// Not overlapped with the backward pass: the session computes all gradients in one compiled
// graph and returns them together, so a bucket cannot start before the last gradient exists.
// Overlap needs the allreduce inside the step graph (an op with a done callback) — not built.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "kiln/tensor.h"
#include "kiln/training.h"

namespace kiln::distributed {

struct DataParallelOptions {
    /// Bytes of gradients per allreduce call (PyTorch DDP's bucket_cap_mb is 25 MB).
    size_t bucket_bytes = size_t{25} << 20;
    /// Benchmarks only: skip the gradient allreduce (the ranks' weights then drift apart), to
    /// measure the step without communication (KILN_DIST_BENCH_NO_ALLREDUCE=1).
    bool skip_allreduce = false;

    /// The defaults, with skip_allreduce from the environment.
    static DataParallelOptions from_env();
};

class DataParallel {
public:
    /// Binds `session` (kept by the caller) to the ranks of `comm`.
    DataParallel(Communicator& comm, TrainingSession& session, DataParallelOptions opts = DataParallelOptions::from_env());

    /// Copies rank 0's parameters to every rank (the start of a run from the model's weights).
    void broadcast_parameters();
    /// One optimizer step on this rank's batch (see above); returns the mean loss over ranks.
    double step(const std::map<std::string, Tensor>& batch);
    /// The buckets of the last step, each a list of parameter names (for tests and logs).
    const std::vector<std::vector<std::string>>& buckets() const { return buckets_; }

private:
    Communicator& comm_;
    TrainingSession& session_;
    DataParallelOptions opts_;
    std::vector<std::vector<std::string>> buckets_;
};

}  // namespace kiln::distributed
