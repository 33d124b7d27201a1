// The front door of partitioning a whole model: bind its input dims and infer its types (the
// pass pipeline's infer_shapes, which also makes shape operands constants, so no rank receives
// a tensor that decides a shape), assign ranks, split. `kiln inspect --partition` and the
// in-process partitioned run both start here.
#pragma once

#include <map>
#include <string>

#include "distributed/partition.h"
#include "distributed/rank_assignment.h"
#include "ir/graph.h"

namespace kiln::distributed {

struct PartitionOptions {
    int num_ranks = 2;
    /// Empty, with no node carrying kiln.rank: the cost-balanced split.
    StageMap stages;
};

/// Binds `dims` (unbound symbolic dims: kInvalidArgument) and infers every type, in place.
void prepare_for_partition(ir::Graph& g, const std::map<std::string, int64_t>& dims);

/// Annotated assignment when the options or the graph's nodes name ranks, else balanced.
RankAssignment assign_ranks(const ir::Graph& g, const PartitionOptions& o);

/// prepare_for_partition, assign_ranks and partition_graph.
Partition partition_model(ir::Graph& g, const std::map<std::string, int64_t>& dims, const PartitionOptions& o);

}  // namespace kiln::distributed
