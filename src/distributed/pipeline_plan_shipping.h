// A pipeline stage's plan (pipeline_plan.h) sent from the master (rank 0 of the pipeline) to
// its worker over the rendezvous, under master dispatch (pipeline_parallel.h,
// docs/distributed.md "Pipeline-parallel training", master and workers).
//
// What crosses the wire, per worker (all non-blocking sends at step 0 of the rendezvous):
//  - "stage:meta", a u8 text of length-prefixed fields: the global batch's inputs (names, dtypes,
//    shapes), which are cut into microbatches, every stage's parameter names and types, the stage
//    split and description, and the stage's own metadata (its keys, seeds, outputs' roles, the
//    batch inputs it reads, the apply graph's outputs);
//  - the stage's graphs as IR text (rank_graph_shipping.h's ship_graph, large constants as
//    tensors): "forward" (not on the loss stage), "backward", "eval", "apply" (with parameters);
//  - "stage:init:NAME", the initial value of each of its parameters.
// The worker's graphs are the master's, bit for bit, and compile to the same kernels.
#pragma once

#include "distributed/pipeline_plan.h"
#include "distributed/rendezvous.h"

namespace kiln::distributed {

/// Master side: sends `plan.stages[rank]` (consumed) and the plan's shared part to `rank`;
/// returns at once.
void ship_pipeline_stage(Rendezvous& rv, PipelinePlan& plan, int rank);

/// Worker side: the plan rank 0 sent to `rank`, `stages[rank]` filled (waits without a deadline:
/// the master may still be building; a lost master is the heartbeat's). kInvalidArgument when
/// what arrives does not read back.
PipelinePlan receive_pipeline_stage(Rendezvous& rv, int rank, int num_ranks);

}  // namespace kiln::distributed
