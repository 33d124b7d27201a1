// Checkpoints of pipeline-parallel training (pipeline_parallel.h, docs/distributed.md): one
// file in TrainingSession's format (compiler/training_checkpoint.h), written by rank 0 after
// gathering every stage's tensors, under TrainingSession's names: "param:<name>" for each
// parameter and "state:opt/<name>/<slot>" for its optimizer state, the step, and the trainer's
// entries. So a pipeline checkpoint is the model's state, not a stage's: a single-process
// `kiln train --resume` loads it, a pipeline run loads a single-process one, and a pipeline run
// with another stage split (other ranks, --stage, microbatches) takes what its stages own. The
// split it was written with is recorded ("pipeline_stages", "pipeline_microbatches") so that a
// resume can say what changed.
//
// Every rank reads the file on resume (so the directory must be visible to every rank, as for
// data-parallel checkpoints), but copies only its own stage's tensors out of it (the file is
// mapped: compiler::read_checkpoint's `keep`), and checks every tensor's name, dtype and shape
// against the whole model's layout, so that every rank accepts or refuses it alike: a missing, extra or differently shaped tensor (another model,
// trainable set or optimizer) is a kInvalidArgument naming it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/optimizer.h"
#include "compiler/training_checkpoint.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

/// The dtype and shape each checkpoint tensor must have, by checkpoint name.
using CheckpointLayout = std::map<std::string, std::pair<DType, Shape>>;

/// "param:<name>": the checkpoint name of parameter `name` (TrainingSession's).
std::string checkpoint_param_name(const std::string& name);
/// "state:<state name>": the checkpoint name of an optimizer state tensor
/// (autodiff::optimizer_state_name).
std::string checkpoint_state_name(const std::string& state_name);

/// The layout of every parameter of `params` (name -> a tensor of its dtype and shape) and of
/// its optimizer state under `optimizer`.
CheckpointLayout checkpoint_layout(const std::map<std::string, std::pair<DType, Shape>>& params,
                                   const autodiff::OptimizerSpec& optimizer);

/// kInvalidArgument, naming the checkpoint `path` and the tensor, unless `c` holds exactly the
/// tensors of `layout` with their dtypes and shapes (read, or skipped: Checkpoint::skipped).
void check_checkpoint_tensors(const std::string& path, const compiler::Checkpoint& c, const CheckpointLayout& layout);

/// The stage split as recorded: each stage's parameters, comma-separated, stages separated by
/// '|' ("W1,b1||W2,b2": a middle stage without parameters).
std::string stage_split_text(const std::vector<std::vector<std::string>>& stage_params);

/// What differs between the split a checkpoint records (`extra`) and this run's: "" when
/// nothing does, else a sentence ("written by one process", "written by 2 stages (W1,b1 | W2,b2)
/// in 4 microbatches; this run has 3 stages (...) in 4").
std::string split_difference(const std::map<std::string, std::string>& extra, const std::string& split,
                             int microbatches);

}  // namespace kiln::distributed
