// Master and workers (docs/distributed.md "Master and workers"): under mpirun, rank 0 (the
// master) imports and partitions the model and ships each worker its rank graph
// (rank_graph_shipping.h); the workers compile their part (through the kernel cache, while the
// master compiles its own) and then run what the master orders, as TensorFlow's master drives
// its workers. The workers never read the model file or the inputs: the master sends each the
// model inputs its graph reads.
//
// Runs are dispatched asynchronously, as Pathways does: enqueue() sends a run's order and feeds
// (non-blocking sends) and returns, so the master can order run n + 1 before run n ends and a
// worker finds its next order waiting when it finishes one; collect() runs the master's own
// stage of the oldest enqueued run and gathers its outputs. A worker that fails (a compile or
// run error) reports it to the master, whose next wait ends with a kiln::Error naming the
// worker's rank and its message.
//
// Keys (rendezvous.h), besides the partition's transfers: "order" (0 -> w, step n: an int64
// [microbatches], 0 = stop), "input:NAME" (0 -> w, step n), "error" (w -> 0, step 0: u8 text).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "distributed/partitioned_run.h"
#include "distributed/rendezvous.h"

namespace kiln::distributed {

class MasterDispatch {
public:
    /// `model` is rank 0's (made with only_rank 0 and a ShipFn that shipped the other ranks).
    MasterDispatch(PartitionedModel& model, Rendezvous& rv);
    ~MasterDispatch();

    /// Orders every worker to run the model on `feeds` (each gets the inputs its graph reads)
    /// with `microbatches`, and returns at once.
    void enqueue(const std::map<std::string, Tensor>& feeds, int microbatches = 1);
    /// Runs rank 0's stage of the oldest enqueued run and returns the model outputs (model
    /// output order). kiln::Error when a worker reported a failure.
    std::vector<Tensor> collect();
    /// Orders every worker to stop (after the last collect; the destructor does it otherwise).
    void stop();

    size_t in_flight() const { return queued_.size(); }

private:
    struct Run {
        std::map<std::string, Tensor> feeds;
        int microbatches = 1;
    };
    void check_workers();

    PartitionedModel& model_;
    Rendezvous& rv_;
    std::deque<Run> queued_;
    int64_t next_order_ = 0;
    bool stopped_ = false;
};

/// A worker's whole life: receives its rank graph from rank 0, compiles it with `opts` (the
/// session options of the command line every rank runs), then runs each order until told to
/// stop. On an error it reports the message to the master, gives the master `grace_s` seconds
/// to end the job, and then rethrows (the caller aborts the job itself).
void run_worker(Rendezvous& rv, int rank, int num_ranks, const SessionOptions& opts, double grace_s = 5.0);

}  // namespace kiln::distributed
