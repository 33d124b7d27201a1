// Splits a graph into one graph per rank (TensorFlow's graph partitioning, DESIGN.md
// "Distribution is a partition plus MPI"). Every edge whose ends are on different ranks gets a
// KilnSend on the producer's rank and a KilnRecv on the consumer's rank, both carrying the
// transfer's key (transfer_key.h); there is one Recv per (tensor, destination rank), shared by
// every consumer there. Constants are copied to each rank that reads them; the model's inputs
// are fed to each rank that reads them (the driver feeds them, as TF's master does); a model
// output is returned by the rank that computes it. Value and node names are kept, so a rank
// graph reads like the part of the whole graph it is.
//
// Send/Recv are IR nodes in the rank graphs (one representation): `kiln inspect --partition`
// prints them, and an executor lowers them — in one process to graph inputs and outputs
// (lower_transfers.h), over MPI to point-to-point calls.
//
// A rank-level cycle (rank 0 feeds rank 1, which feeds rank 0 again) is a kInvalidArgument
// error naming the edges: every rank runs its graph whole, so ranks must form a pipeline (a
// DAG). The cost-balanced split never makes one; annotations may.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/rank_assignment.h"
#include "distributed/transfer_key.h"
#include "ir/graph.h"

namespace kiln::distributed {

struct Transfer {
    TransferKey key;
    ir::TensorType type;
    int64_t bytes = 0;
};

struct RankGraph {
    int rank = 0;
    ir::Graph graph;  // holds KilnSend / KilnRecv nodes
    double estimated_seconds = 0;
};

/// Where model output i is computed: the rank, and the value's name in that rank's graph.
struct OutputPlace {
    int rank = 0;
    std::string value;
};

struct Partition {
    std::vector<RankGraph> ranks;      // ranks[r].rank == r
    std::vector<Transfer> transfers;   // in the order the split made them
    std::vector<OutputPlace> outputs;  // one per model output
    std::vector<int> run_order;        // every rank after the ranks it receives from
};

/// Splits `g` by `a` (every node of g has a rank). Types must be inferred; `incarnation` is the
/// source processes' (TransferKey::incarnation).
Partition partition_graph(const ir::Graph& g, const RankAssignment& a, uint64_t incarnation = 1);

/// What `kiln inspect --partition` prints: each rank's graph (constants elided past 16 values)
/// with its estimated cost, then the transfers (key, type, bytes) and their total.
std::string partition_report(const Partition& p);

}  // namespace kiln::distributed
