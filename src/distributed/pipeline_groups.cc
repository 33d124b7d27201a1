// split_pipeline_groups (pipeline_groups.h).
#include "distributed/pipeline_groups.h"

#include <string>

#include "support/error.h"

namespace kiln::distributed {

PipelineGroups split_pipeline_groups(Communicator& world, int stages) {
    const int n = world.size();
    KILN_CHECK(stages >= 2, kInvalidArgument)
        << "--pipeline-stages " << stages << ": a pipeline needs at least 2 stages";
    KILN_CHECK(stages <= n && n % stages == 0, kInvalidArgument)
        << "--pipeline-stages " << stages << " does not divide the job's " << n
        << " ranks: pipeline and data parallelism together need ranks = stages x replicas";
    PipelineGroups g;
    g.stages = stages;
    g.replicas = n / stages;
    g.stage = world.rank() % stages;
    g.replica = world.rank() / stages;
    g.pipeline = world.split(g.replica, g.stage, "replica " + std::to_string(g.replica) + "'s pipeline");
    g.replicas_of_stage = world.split(g.stage, g.replica, "stage " + std::to_string(g.stage) + "'s replicas");
    return g;
}

PipelineGroups group_pipeline_ranks(Communicator& world, int stages, bool data_parallel) {
    if (data_parallel) return split_pipeline_groups(world, stages);
    KILN_CHECK(stages == 0 || stages == world.size(), kInvalidArgument)
        << "--pipeline-stages " << stages << " over " << world.size() << " ranks would make "
        << (stages > 0 && world.size() % stages == 0 ? std::to_string(world.size() / stages) : std::string("several"))
        << " replicas of the pipeline: add --data-parallel (or leave --pipeline-stages out: one stage per rank)";
    PipelineGroups g;
    g.stages = world.size();
    g.stage = world.rank();
    return g;
}

uint64_t replica_seed(uint64_t seed, int replica) {
    return seed + static_cast<uint64_t>(replica) * 0x9e3779b97f4a7c15ull;
}

}  // namespace kiln::distributed
