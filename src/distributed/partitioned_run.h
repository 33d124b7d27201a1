// A partitioned model, run in one process or over MPI. Each rank's graph is lowered
// (lower_transfers.h) and compiled by the normal compiler with the session's options.
//
// In one process (run) the ranks run in the partition's rank order and transfers move through
// a LocalRendezvous keyed as over MPI (the key with the step id): the reference the MPI path is
// checked against. Under mpirun (run_mpi) every process builds the same partition (it is
// deterministic), compiles only its own rank's graph, receives that graph's inputs through the
// MPI rendezvous (rendezvous.h), runs, and sends what other ranks read; the model outputs are
// sent to rank 0. Either way a partitioned run computes what the whole model computes, bit for
// bit (tests/models/test_partition_vs_whole.py).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "distributed/local_rendezvous.h"
#include "distributed/lower_transfers.h"
#include "distributed/partition_model.h"
#include "distributed/rendezvous.h"
#include "kiln/session.h"
#include "runtime/model_runner.h"

namespace kiln::distributed {

/// A graph value as Session::inputs() / outputs() describe it.
TensorInfo tensor_info_of(const ir::Value& v);

class PartitionedModel {
public:
    /// Partitions `g` (the imported model) and compiles every rank's graph with `opts`
    /// (dims, opt_level, kernels, tuning log, threads as a Session takes them).
    /// `only_rank` >= 0: compile only that rank's graph (an MPI process runs its own rank).
    /// `ship` (a master, master_dispatch.h; only_rank is then its own rank): each other rank's
    /// graph is handed to it, before this rank compiles, instead of being kept here.
    using ShipFn = std::function<void(RankGraph)>;
    PartitionedModel(ir::Graph g, const PartitionOptions& popts, const SessionOptions& opts, int only_rank = -1,
                     const ShipFn& ship = {});
    /// A worker's model: its own rank graph, as the master partitioned and shipped it
    /// (rank_graph_shipping.h), compiled; the other ranks are known only by number.
    /// inputs() / outputs() are then the model inputs this rank reads and the model outputs it
    /// computes.
    PartitionedModel(RankGraph mine, int num_ranks, const SessionOptions& opts);
    ~PartitionedModel();

    /// Runs one step: feeds by model input name; outputs in model output order. With
    /// `microbatches` > 1 the feeds are cut along their leading axis (microbatch.h) and each
    /// part runs as a step of its own (the ranks were compiled for a part's shapes).
    std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds, int microbatches = 1);
    /// Runs one step as rank `rank` of an MPI job (made with only_rank == rank; every rank calls
    /// it with the same feeds): transfers through `rv`. Returns the model outputs on rank 0,
    /// nothing on the others. With `microbatches` > 1 the ranks form a pipeline: rank r runs
    /// microbatch m + 1 while rank r + 1 runs microbatch m (GPipe's forward schedule).
    std::vector<Tensor> run_mpi(const std::map<std::string, Tensor>& feeds, Rendezvous& rv, int rank,
                                int microbatches = 1);

    /// partition_report() of the partition, made before the rank graphs were lowered.
    const std::string& report() const { return report_; }
    const std::vector<Transfer>& transfers() const { return transfers_; }
    /// The whole model's inputs and outputs (as Session::inputs() / outputs() describe them).
    const std::vector<TensorInfo>& inputs() const { return inputs_; }
    const std::vector<TensorInfo>& outputs() const { return outputs_info_; }
    int num_ranks() const { return static_cast<int>(ranks_.size()); }
    /// The names of the model inputs rank `rank`'s graph reads (the feeds a master sends it).
    const std::vector<std::string>& model_inputs_of(int rank) const;
    /// Kernels compiled over all ranks.
    int kernels() const { return kernels_; }

private:
    struct Rank {
        LoweredRank lowered;
        std::shared_ptr<runtime::PreparedExecutable> prepared;
        std::map<std::string, std::string> key_of_input;  // graph input name -> transfer key
        std::vector<std::string> output_names;            // before compile() rewrote the graph
        std::vector<std::string> model_inputs;            // the model inputs its graph reads
    };
    compiler::CompileOptions compile_options(const SessionOptions& opts) const;
    /// Lowers rg's transfers into ranks_[rg.rank], compiling it when `compile`.
    void add_rank(RankGraph rg, bool compile, const compiler::CompileOptions& copts);
    /// Receives a transfer of `step` by its partition key; sends a value under one.
    using RecvFn = std::function<Tensor(const TransferKey&)>;
    using SendFn = std::function<void(const TransferKey&, const Tensor&)>;
    std::vector<Tensor> run_rank(Rank& r, const std::map<std::string, Tensor>& feeds, const RecvFn& recv,
                                 const SendFn& send);
    /// Index of model output `o` among rank o.rank's outputs.
    size_t output_index(const OutputPlace& o) const;
    std::vector<std::string> output_names() const;

    std::string report_;
    std::vector<TensorInfo> inputs_, outputs_info_;
    std::vector<Transfer> transfers_;
    std::vector<OutputPlace> outputs_;
    std::vector<int> run_order_;
    std::unique_ptr<runtime::ModelRunner> runner_;
    std::vector<Rank> ranks_;
    int kernels_ = 0;
    int64_t next_step_ = 0;
};

}  // namespace kiln::distributed
