// Pipeline and data parallelism together (`mpirun -np N kiln train ... --pipeline-parallel
// --pipeline-stages S --data-parallel`, docs/distributed.md): the job's N ranks as R = N / S
// replicas of an S-stage pipeline. World rank w holds stage w % S of replica w / S, so replica 0
// is ranks 0..S-1 (world rank 0 is its first stage, which prints and writes) and a replica's
// stages are neighbours. Two splits of the world communicator:
//  - `pipeline`: the S ranks of this rank's replica, ranked by stage: its stages' Send/Recv
//    (pipeline_parallel.h runs on it as on a whole job);
//  - `replicas`: the R ranks holding this rank's stage, ranked by replica: the allreduce that
//    averages the stage's gradients before its optimizer step.
#pragma once

#include <cstdint>
#include <memory>

#include "distributed/communicator.h"

namespace kiln::distributed {

struct PipelineGroups {
    int stages = 1, replicas = 1;  // S and R
    int stage = 0, replica = 0;    // this rank's
    std::unique_ptr<Communicator> pipeline;  // this replica's stages, rank = stage
    std::unique_ptr<Communicator> replicas_of_stage;  // this stage's replicas, rank = replica
};

/// Splits `world` into R = world.size() / `stages` pipelines of `stages` ranks. Every rank calls
/// it. kInvalidArgument, naming the counts, when `stages` is below 2 or does not divide the
/// job's ranks (checked on every rank alike before any MPI call).
PipelineGroups split_pipeline_groups(Communicator& world, int stages);

/// The job's ranks as pipelines, as `kiln train --pipeline-parallel` and kiln::PipelineTrainer
/// group them: with `data_parallel`, split_pipeline_groups(world, stages); without, one pipeline
/// of every rank (`stages` 0 or the job's size; any other count is kInvalidArgument naming the
/// replicas it would make).
PipelineGroups group_pipeline_ranks(Communicator& world, int stages, bool data_parallel);

/// The training seed of replica `replica`: each replica draws its own dropout masks, as
/// data-parallel ranks do.
uint64_t replica_seed(uint64_t seed, int replica);

}  // namespace kiln::distributed
