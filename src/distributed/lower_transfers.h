// Lowers a rank graph's KilnRecv / KilnSend nodes (partition.h) for a run in one process: each
// Recv becomes a graph input and each sent value a graph output, so the rank graph compiles
// like any model and the driver moves tensors between ranks by key (partitioned_run.h).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::distributed {

struct LoweredRank {
    ir::Graph graph;  // no KilnSend / KilnRecv left
    /// Per graph input: the key of the transfer that feeds it, or "" for a model input.
    std::vector<std::string> input_keys;
    /// Per graph output: the keys of the transfers it is sent by (several when it goes to
    /// several ranks; none for a model output that is sent nowhere).
    std::vector<std::vector<std::string>> output_keys;
    /// The first model_outputs graph outputs are the model outputs this rank computes.
    size_t model_outputs = 0;
};

LoweredRank lower_transfers(ir::Graph g);

}  // namespace kiln::distributed
