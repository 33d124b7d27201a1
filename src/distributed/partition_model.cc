#include "distributed/partition_model.h"

#include "compiler/compile.h"
#include "pass/pipeline.h"

namespace kiln::distributed {

void prepare_for_partition(ir::Graph& g, const std::map<std::string, int64_t>& dims, int opt_level) {
    compiler::bind_input_shapes(g, dims);
    // Fusion too: its groups tell the rank assignment where not to cut. Each rank's compile
    // runs the pipeline again on its part, and fuses the same groups.
    pass::run_passes(g, pass::passes_for_level(opt_level), compiler::pass_context(), {});
}

RankAssignment assign_ranks(const ir::Graph& g, const PartitionOptions& o) {
    bool annotated = !o.stages.empty();
    for (const ir::Node* n : g.nodes()) annotated = annotated || n->has_attr(kRankAttr);
    return annotated ? assign_ranks_annotated(g, o.num_ranks, o.stages) : assign_ranks_balanced(g, o.num_ranks);
}

Partition partition_model(ir::Graph& g, const std::map<std::string, int64_t>& dims, const PartitionOptions& o,
                          int opt_level) {
    prepare_for_partition(g, dims, opt_level);
    return partition_graph(g, assign_ranks(g, o));
}

}  // namespace kiln::distributed
