// Runs one wave of collective nodes (collective_stages.h) over MPI through collectives.h, with
// tensor fusion across nodes: every AllReduce of the wave with the same reduction is one
// allreduce() call and every Broadcast with the same root one broadcast() call, whose tensors
// fusion.h packs into one buffer per dtype (one MPI call each). AllGather and ReduceScatter are
// one call per node (the library does not fuse them). Groups run in the order of their first
// node, so every rank makes the same calls in the same order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "distributed/collective_stages.h"
#include "distributed/communicator.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

/// Runs `wave`: reads each node's input from `values` (by value name) and stores its output
/// there. `comm` nullptr: a run of one rank outside MPI, where every collective is the identity
/// (a Broadcast root or world_size other than 1 is then an error naming the node). Errors
/// (kInvalidArgument) name the node: a world_size that differs from the job's size, a root out
/// of range, or (agreement.h) a rank whose tensor differs in shape or dtype from rank 0's.
void run_collective_wave(Communicator* comm, const std::vector<CollectiveNode>& wave,
                         std::map<std::string, Tensor>& values);

}  // namespace kiln::distributed
