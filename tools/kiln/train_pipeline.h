// `mpirun -np N kiln train MODEL ... --pipeline-parallel [--microbatches M] [--stage NODE=RANK]`:
// the training loop of a pipeline-parallel job (distributed/pipeline_parallel.h,
// docs/distributed.md). Every rank reads the whole global batch of --batch-size records (the
// same pipeline, the same seed) and feeds its stage what it reads; rank 0 prints and writes the
// metrics CSV; every rank takes part in the export and the checkpoints, which rank 0 writes.
// With --data-parallel --pipeline-stages S the ranks are S stages x (ranks / S) replicas
// (distributed/pipeline_groups.h): each replica reads its slice of every global batch of
// replicas x --batch-size records, each stage's gradients are averaged over its replicas before
// the update, and replica 0 writes the checkpoints and the export.
#pragma once

#include "progress_bar.h"
#include "train_args.h"

namespace kiln::cli {

/// Trains `a.model` as one stage of the job's pipeline; returns the exit code. Refuses
/// --recompute. Evaluation runs the held-out set through the stages after each epoch. Checkpoints
/// (distributed/pipeline_checkpoint.h) hold every stage's state in one file, in the
/// single-process format, written by rank 0; --resume loads it on every rank.
int train_pipeline(TrainArgs a, ProgressBar& bar);

}  // namespace kiln::cli
