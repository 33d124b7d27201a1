// Which rank computes each node of a graph, before the graph is split (distributed/partition.h):
// from the user's annotations, or a cost-balanced split of the topological order into
// contiguous pipeline stages. Constants are no nodes: they go with their consumers (the split
// copies each to every rank that reads it), and the model's inputs are fed to every rank that
// reads them.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::distributed {

/// The node attribute that places a node (IR text: `{kiln.rank=1}`); the split removes it.
inline constexpr const char* kRankAttr = "kiln.rank";

/// A user's stage map: node name (or, for an unnamed node, its first output's name) -> rank.
using StageMap = std::map<std::string, int>;

/// Parses "conv1=0,fc=1" pieces (each may hold several, comma-separated); kInvalidArgument
/// names a malformed piece.
StageMap parse_stage_map(const std::vector<std::string>& pieces);

struct RankAssignment {
    int num_ranks = 1;
    std::unordered_map<const ir::Node*, int> rank;  // every node of the graph
    std::vector<double> stage_seconds;               // estimated cost per rank (stage_cost.h)
};

/// From annotations: the stage map, else the node's kiln.rank attribute, else the largest rank
/// of its producers (a node reading only graph inputs: rank 0); a node reading only constants
/// takes the smallest rank of its consumers. A fusion group (ir::Node::group) goes whole to the
/// largest rank among its nodes, and the nodes not placed follow their producers again.
/// kInvalidArgument: a stage-map name no node has, a rank outside [0, num_ranks).
RankAssignment assign_ranks_annotated(const ir::Graph& g, int num_ranks, const StageMap& stages);

/// Cost-balanced: `num_ranks` contiguous, non-empty stages of the topological order that
/// minimise the most expensive stage's estimated time, cut only where no fusion group spans
/// the cut. kInvalidArgument with fewer nodes than ranks, or no such cut.
RankAssignment assign_ranks_balanced(const ir::Graph& g, int num_ranks);

/// Fills a.stage_seconds from the nodes' costs.
void compute_stage_costs(const ir::Graph& g, RankAssignment& a);

}  // namespace kiln::distributed
