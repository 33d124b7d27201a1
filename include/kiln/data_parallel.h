// Data-parallel training over MPI, the public face of the distributed layer's data-parallel step
// (docs/distributed.md, "Data-parallel training"): every rank of a job started by mpirun holds
// the whole model and trains on its own part of each global batch; a step averages the ranks'
// gradients (in buckets started while the backward pass runs) before the optimizer's update,
// so all ranks keep identical weights. The Python package wraps it.
// Implemented by the kiln_distributed library (it brings MPI).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

class TrainingSession;  // declared with the training API

/// This process's rank and the job's size (MPI starts on the first call of either, or with the
/// first DataParallelTrainer; outside mpirun a job of one: 0 and 1).
int mpi_rank();
int mpi_size();
/// Ends MPI: once per process, on every rank, after the last step (a no-op when MPI never
/// started).
void mpi_finalize();

/// How a DataParallelTrainer steps (the KILN_DIST_* environment variables set the rest).
struct DataParallelTrainerOptions {
    /// Bytes of gradients per allreduce; 0: the default (4 MB, or KILN_DIST_BUCKET_MB).
    size_t bucket_bytes = 0;
    /// BatchNormalization statistics over the global batch, every rank's (PyTorch's
    /// SyncBatchNorm; docs/distributed.md, "Synchronized BatchNorm"); off: each rank's own batch.
    /// Needs a session of TrainingSession::create; every rank must set it alike.
    bool sync_batch_norm = false;
};

class DataParallelTrainer {
public:
    /// Binds `session` (kept by the caller) to the job's ranks. `bucket_bytes` 0: the default
    /// (4 MB, or KILN_DIST_BUCKET_MB).
    explicit DataParallelTrainer(TrainingSession& session, size_t bucket_bytes = 0);
    DataParallelTrainer(TrainingSession& session, const DataParallelTrainerOptions& opts);
    ~DataParallelTrainer();
    DataParallelTrainer(const DataParallelTrainer&) = delete;
    DataParallelTrainer& operator=(const DataParallelTrainer&) = delete;

    /// Copies rank 0's parameters to every rank.
    void broadcast_parameters();
    /// One step on this rank's batch; returns the mean loss over the ranks (the global batch's).
    double step(const std::map<std::string, Tensor>& batch);
    /// The allreduce buckets of a step (known after the first step).
    int bucket_count() const;
    /// BatchNormalization nodes the last step normalized with global statistics (0 with
    /// sync_batch_norm off, or in a model without BatchNormalization).
    int synchronized_batch_norms() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
