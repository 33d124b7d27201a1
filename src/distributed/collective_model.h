// A model holding collective graph ops (op/defs/collective_ops.cc), run on every rank of an MPI
// job: `mpiexec -n N kiln run model.onnx` (docs/distributed.md, "Collectives as graph ops").
//
// Every rank imports and runs the whole model. The model is cut at its collectives
// (collective_stages.h); each stage is compiled by the normal compiler with the session's
// options, and a run is stage 0, wave 0, stage 1, ...: the waves' collectives exchange data
// through collectives.h (collective_wave.h), with the nodes of one wave fused into as few MPI
// calls as their kinds allow. Without a communicator (a process outside mpirun) the collectives
// are the identity, as for a job of one rank.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/collective_stages.h"
#include "distributed/communicator.h"
#include "kiln/session.h"
#include "runtime/model_runner.h"

namespace kiln::distributed {

class CollectiveModel {
public:
    /// Binds `opts.dims`, cuts `g` and compiles its stages. `comm` may be nullptr (one rank);
    /// otherwise every rank of it must construct the same model and call run() alike.
    CollectiveModel(ir::Graph g, const SessionOptions& opts, Communicator* comm);
    ~CollectiveModel();

    /// One run: feeds by model input name; outputs in model output order (every rank gets its
    /// own: after an AllReduce they are equal, after a ReduceScatter they are the rank's block).
    std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds);

    const std::vector<TensorInfo>& inputs() const { return inputs_; }
    const std::vector<TensorInfo>& outputs() const { return outputs_; }
    /// Collective nodes and waves in the model; kernels compiled over all stages.
    size_t collective_nodes() const;
    size_t waves() const { return stages_.waves.size(); }
    int kernels() const { return kernels_; }
    /// MPI data calls (collective_data_calls()) the last run issued: fewer than
    /// collective_nodes() when fusion packed nodes together.
    size_t last_run_data_calls() const { return last_run_calls_; }

private:
    struct Stage;
    void run_stage(Stage& s, std::map<std::string, Tensor>& values);

    Communicator* comm_;
    CollectiveStages stages_;
    std::vector<std::unique_ptr<Stage>> compiled_;
    std::unique_ptr<runtime::ModelRunner> runner_;
    std::vector<TensorInfo> inputs_, outputs_;
    int kernels_ = 0;
    size_t last_run_calls_ = 0;
};

}  // namespace kiln::distributed
