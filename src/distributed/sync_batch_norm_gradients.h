// The gradients of a data-parallel step whose BatchNormalization statistics are the global
// batch's (DataParallelOptions::sync_batch_norm, PyTorch's SyncBatchNorm; docs/distributed.md,
// "Synchronized BatchNorm").
//
// The session's gradients graph is built with global statistics (autodiff/sync_batch_norm.h:
// per-channel sums AllReduce'd in the forward pass, and by autodiff in the backward pass) and
// run as a CollectiveModel: cut at its collectives, the pieces compiled like any graph, the
// collectives between them over MPI with same-wave tensors fused into one call. Each step feeds
// it the batch, the session's parameters and running statistics, stores the updated running
// statistics back into the session and returns the local gradients, which DataParallel then
// averages as without synchronization. The gradients come after the whole backward pass (no
// overlap of the gradient buckets with it).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "kiln/training.h"

namespace kiln::compiler {
class TrainingGraphSource;
}

namespace kiln::distributed {

class CollectiveModel;

class SyncBatchNormGradients {
public:
    /// Builds and compiles the graph. kInvalidArgument when `session` is not one of
    /// TrainingSession::create; kUnsupported with activation recomputation. A model without
    /// training-mode BatchNormalization compiles nothing (layers() empty).
    SyncBatchNormGradients(Communicator& comm, TrainingSession& session);
    ~SyncBatchNormGradients();

    /// The synchronized BatchNormalization nodes, in graph order.
    const std::vector<std::string>& layers() const { return layers_; }
    /// One line per running statistic ("sync batch norm: bn.running_mean f32[8]"), for the
    /// step's agreement check: ranks whose layers differ fail before any collective.
    const std::vector<std::string>& descriptions() const { return descriptions_; }
    /// This rank's loss and gradients on its batch (by parameter name), with global statistics;
    /// the session's running statistics are updated. Every rank must call it alike.
    std::map<std::string, Tensor> gradients(const std::map<std::string, Tensor>& batch, double* loss);

private:
    void check_batch(const std::map<std::string, Tensor>& batch) const;

    TrainingSession& session_;
    compiler::TrainingGraphSource* source_ = nullptr;
    std::unique_ptr<CollectiveModel> model_;
    std::vector<std::string> outputs_;  // role keys of the graph's outputs (TrainingGraph::outputs)
    std::vector<std::string> layers_;
    std::vector<std::string> descriptions_;
};

}  // namespace kiln::distributed
