// A partitioned model run in one process: the reference the MPI path is checked against. Each
// rank's graph is lowered (lower_transfers.h), compiled by the normal compiler with the
// session's options, and run in the partition's rank order; transfers move through a
// LocalRendezvous keyed as over MPI (the key with the step id). A partitioned run computes
// what the whole model computes; tests/models/test_partition_vs_whole.py checks bit for bit.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/local_rendezvous.h"
#include "distributed/lower_transfers.h"
#include "distributed/partition_model.h"
#include "kiln/session.h"
#include "runtime/model_runner.h"

namespace kiln::distributed {

class PartitionedModel {
public:
    /// Partitions `g` (the imported model) and compiles every rank's graph with `opts`
    /// (dims, opt_level, kernels, tuning log, threads as a Session takes them).
    PartitionedModel(ir::Graph g, const PartitionOptions& popts, const SessionOptions& opts);
    ~PartitionedModel();

    /// Runs one step: feeds by model input name; outputs in model output order.
    std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds);

    /// partition_report() of the partition, made before the rank graphs were lowered.
    const std::string& report() const { return report_; }
    const std::vector<Transfer>& transfers() const { return transfers_; }
    /// The whole model's inputs and outputs (as Session::inputs() / outputs() describe them).
    const std::vector<TensorInfo>& inputs() const { return inputs_; }
    const std::vector<TensorInfo>& outputs() const { return outputs_info_; }
    int num_ranks() const { return static_cast<int>(ranks_.size()); }
    /// Kernels compiled over all ranks.
    int kernels() const { return kernels_; }

private:
    struct Rank {
        LoweredRank lowered;
        std::shared_ptr<runtime::PreparedExecutable> prepared;
        std::map<std::string, std::string> key_of_input;  // graph input name -> transfer key
        std::vector<std::string> output_names;            // before compile() rewrote the graph
    };
    std::vector<Tensor> run_rank(Rank& r, const std::map<std::string, Tensor>& feeds, LocalRendezvous& rv,
                                 int64_t step);

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
