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

}  // namespace kiln::distributed
