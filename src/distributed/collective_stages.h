// Cuts a model holding collective ops (AllReduce, Broadcast, AllGather, ReduceScatter; domain
// ai.kiln.distributed, op/defs/collective_ops.cc) into compute stages and collective waves, so
// that the stages compile like any model and the collectives run between them over MPI
// (collective_model.h).
//
// A collective's wave is the number of collectives on the longest path from the model's inputs
// to it (0 for one that reads only inputs or computed values); a compute node's stage is the
// number of waves it must wait for. A run is stage 0, wave 0, stage 1, wave 1, ..., the last
// stage. Every collective of one wave is ready at the same time (its inputs come from stages
// before it), so a wave is where tensor fusion packs several nodes into one MPI call. Every rank
// makes the same cut of the same model, so every rank issues the same calls in the same order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "distributed/reduce_op.h"
#include "ir/graph.h"

namespace kiln::distributed {

/// One collective node, as the run needs it.
struct CollectiveNode {
    std::string op;      // AllReduce, Broadcast, AllGather or ReduceScatter
    std::string name;    // the node's name (its output's when it has none): errors name it
    std::string input;   // value names
    std::string output;
    ReduceOp reduce = ReduceOp::kSum;  // AllReduce, ReduceScatter
    int64_t root = 0;                  // Broadcast
    int64_t axis = 0;                  // AllGather, ReduceScatter; normalised (>= 0)
    int64_t world_size = 0;            // AllGather, ReduceScatter: the attribute (0 for the others)
};

struct CollectiveStages {
    /// stages.size() == waves.size() + 1. A stage's inputs and outputs are named as the model's
    /// values; a stage may have no outputs (nothing to run).
    std::vector<ir::Graph> stages;
    std::vector<std::vector<CollectiveNode>> waves;
    /// Constants that a collective or the model's outputs read directly, by name.
    std::map<std::string, Tensor> constants;
    /// The model's output value names, in order.
    std::vector<std::string> outputs;
};

/// Whether `g` holds a collective op.
bool has_collectives(const ir::Graph& g);

/// The cut of `g` (types inferred, shapes bound). Nodes inside If/Loop/Scan bodies are not
/// searched: a collective there is a kUnsupported error naming it.
CollectiveStages split_at_collectives(const ir::Graph& g);

}  // namespace kiln::distributed
