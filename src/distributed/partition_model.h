// The front door of partitioning a whole model: bind its input dims, run the -O pipeline on
// the whole graph, assign ranks (never cutting a fusion group), split.
// `kiln inspect --partition` and the in-process partitioned run both start here.
//
// Why the rewrites come first (as TensorFlow partitions the graph Grappler optimized): a rewrite
// that sees a whole pattern computes differently from one that sees half of it. BatchNorm folded
// into its Conv rounds differently from a Conv and a BatchNorm, and with the blocked layout
// (-O3) a tensor cut out of a blocked region would arrive plain and be re-blocked by a reorder
// that fuses into its consumer's epilogue, which moves that conv off oneDNN onto a generated
// kernel with another summation order (measured on resnet_block: 1.8e-7 off). Split after the
// rewrites, every rank compiles the same nodes the whole model compiles, and a transfer carries
// the tensor in the layout its producer wrote. Fusion groups are kept whole for the same reason
// (rank_assignment.h): the kernel units, and so the kernels chosen, are the whole model's.
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

/// Binds `dims` (unbound symbolic dims: kInvalidArgument) and runs the passes of `opt_level`
/// in place: types are static, shape operands constant and fusion groups marked after it.
void prepare_for_partition(ir::Graph& g, const std::map<std::string, int64_t>& dims, int opt_level);

/// Annotated assignment when the options or the graph's nodes name ranks, else balanced.
RankAssignment assign_ranks(const ir::Graph& g, const PartitionOptions& o);

/// prepare_for_partition, assign_ranks and partition_graph.
Partition partition_model(ir::Graph& g, const std::map<std::string, int64_t>& dims, const PartitionOptions& o,
                          int opt_level);

}  // namespace kiln::distributed
