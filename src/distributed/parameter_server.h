// Parameter-server training over MPI (`mpirun -np N kiln train ... --parameter-servers S`,
// docs/distributed.md), TF1's other topology beside data-parallel: ranks 0..S-1 hold the
// parameters, sharded by bytes (parameter_server_layout.h), and the optimizer state of their
// shard; the other N-S ranks are workers, each reading its own shard of the data.
//
// A worker's step t (ParameterWorker::step): pull the weights of step t from every server, the
// session's gradients on its batch (TrainingOptions::split_step), push each gradient to the
// server that owns it, with the loss. Transfers go through the rendezvous (rendezvous.h: keyed
// non-blocking point-to-point, a progress thread, receives with the communicator's deadline); a
// lost rank is the heartbeat's (heartbeat.h: every other rank exits naming it).
//
// - sync: a server waits for every worker's gradients of step t, takes their mean (summed in
//   worker-rank order, then divided: deterministic), applies the optimizer once, and sends the
//   new weights to every worker as step t+1's. With equal batches this is data-parallel
//   training: W workers x batch B step as W data-parallel ranks x batch B.
// - async (bounded staleness K): a server applies each worker's gradients as they arrive (one
//   optimizer step each, not averaged), and answers a worker's pull of step t+1 only once the
//   slowest worker has had at least t+1-K steps applied: no worker runs more than K steps ahead
//   of the slowest one's last applied step. K = 0 is lock-step without the averaging.
//
// A server runs the session's whole apply graph with zero gradients for the parameters it does
// not own (their values there are never read); --clip-norm is refused, since the global norm
// spans the servers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/parameter_server_layout.h"
#include "distributed/rendezvous.h"
#include "kiln/tensor.h"
#include "kiln/training.h"

namespace kiln::distributed {

struct ParameterServerOptions {
    int servers = 1;
    bool async = false;
    /// async: the most steps a worker may run ahead of the slowest worker's last applied step.
    int staleness = 2;
};

/// What a server did (for tests, logs and benchmarks).
struct ParameterServerStats {
    int64_t updates = 0;  // optimizer applications
    /// async: the largest lead (its steps applied minus the slowest worker's) with which a worker
    /// was let go on; never above the staleness bound.
    int64_t max_lead = 0;
    /// async: pulls held back because the worker was `staleness` steps ahead.
    int64_t held_back = 0;
    double wait_s = 0;   // waiting for gradients
    double apply_s = 0;  // the optimizer
};

/// What a worker saw.
struct ParameterWorkerStats {
    int64_t steps = 0;
    /// The largest (step - the slowest worker's applied steps, as its servers reported them)
    /// at which this worker started a step: its staleness; never above the bound.
    int64_t max_staleness = 0;
    double pull_s = 0;       // waiting for weights
    double gradients_s = 0;  // forward and backward
};

/// The layout for `comm`'s ranks and `session`'s parameters, checked to agree on every rank
/// (collective: every rank calls it).
ParameterServerLayout parameter_server_layout(Communicator& comm, const TrainingSession& session, int servers);

/// A server rank's part (comm.rank() < opts.servers). Construct on every rank at the same point,
/// this or a ParameterWorker (collective).
class ParameterServer {
public:
    /// Called after each optimizer application: its number (1, 2, ...) and the loss — sync: the
    /// mean over workers of step update-1; async: the loss of the worker whose gradients it was.
    using UpdateFn = std::function<void(int64_t update, double loss)>;

    ParameterServer(Communicator& comm, TrainingSession& session, ParameterServerOptions opts);
    ~ParameterServer();

    /// Serves until every worker has pushed `steps` steps and pulled the final weights.
    void serve(int64_t steps, const UpdateFn& on_update = {});
    /// After serve(), on every server: rank 0's session receives every shard's final weights
    /// (for export); the others send theirs.
    void gather_parameters();

    const ParameterServerLayout& layout() const { return layout_; }
    const ParameterServerStats& stats() const { return stats_; }

private:
    /// Worker `w`'s gradients of `step` for this server's parameters (blocking).
    std::map<std::string, Tensor> receive_gradients(int w, int64_t step);
    /// Worker `w`'s loss of `step` (blocking).
    double receive_loss(int w, int64_t step);
    /// One optimizer step on this server's parameters.
    void apply(const std::map<std::string, Tensor>& grads);
    void send_weights(int w, int64_t step, int64_t clock);
    void serve_sync(int64_t steps, const UpdateFn& on_update);
    void serve_async(int64_t steps, const UpdateFn& on_update);

    Communicator& comm_;
    TrainingSession& session_;
    ParameterServerOptions opts_;
    ParameterServerLayout layout_;
    std::unique_ptr<Rendezvous> rendezvous_;
    std::map<std::string, Tensor> zeros_;  // the gradients of the parameters served elsewhere
    ParameterServerStats stats_;
};

/// A worker rank's part (comm.rank() >= opts.servers).
class ParameterWorker {
public:
    ParameterWorker(Communicator& comm, TrainingSession& session, ParameterServerOptions opts);
    ~ParameterWorker();

    /// One step on this worker's batch (see above); returns this worker's loss.
    double step(const std::map<std::string, Tensor>& batch);
    /// After the last step: pulls the final weights into the session.
    void finish();

    const ParameterServerLayout& layout() const { return layout_; }
    const ParameterWorkerStats& stats() const { return stats_; }

private:
    void pull(int64_t step);

    Communicator& comm_;
    TrainingSession& session_;
    ParameterServerOptions opts_;
    ParameterServerLayout layout_;
    std::unique_ptr<Rendezvous> rendezvous_;
    int64_t step_ = 0;
    bool finished_ = false;
    ParameterWorkerStats stats_;
};

}  // namespace kiln::distributed
