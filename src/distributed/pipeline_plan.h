// What pipeline-parallel training derives from the model file (pipeline_parallel.h): the global
// batch's inputs, which of them are cut into microbatches, every stage's parameters and the
// stage split, and per stage its graphs (pipeline_stage_graph.h), its optimizer update, its
// parameters' initial values and the batch inputs it reads. Every rank builds it itself by
// default; under master dispatch rank 0 alone reads the model, builds every stage's part and
// ships each worker its own (pipeline_plan_shipping.h), so a worker never opens the model file.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/training_graph.h"
#include "distributed/pipeline_stage_graph.h"
#include "kiln/session.h"
#include "kiln/training.h"

namespace kiln::distributed {

/// One stage's part of the plan.
struct PipelineStagePlan {
    PipelineStageGraph graph;
    autodiff::TrainingGraph apply;  // the optimizer update of its parameters (empty graph without any)
    std::map<std::string, Tensor> initial;  // its parameters' values in the model
    std::set<std::string> inputs;           // the batch inputs its graphs read (labels on the loss stage)
};

struct PipelinePlan {
    /// The inputs of a step at the global batch: the model's and the labels.
    std::vector<TensorInfo> batch_inputs;
    /// The batch inputs cut into microbatches (the rest go whole to every microbatch).
    std::set<std::string> batched;
    std::vector<std::string> params;                           // every trained parameter, model order
    std::vector<std::vector<std::string>> stage_params;        // per stage
    std::map<std::string, std::pair<DType, Shape>> param_types;  // every stage's parameters
    std::string split;     // pipeline_checkpoint.h's stage_split_text
    std::string describe;  // one line per stage
    /// Per stage; only those asked of make_pipeline_plan (or, received by a worker, its own) are
    /// filled, the others are default.
    std::vector<PipelineStagePlan> stages;
};

/// The pipeline's partition and schedule inputs (PipelineParallelOptions' model-shaping part).
struct PipelinePlanOptions {
    int num_ranks = 2;
    int microbatches = 1;
    StageMap stages;
    bool rematerialize = false;
};

/// Builds the plan from `onnx_path` for training options `opts` (their dims bind the global
/// batch). `rank` >= 0 fills only that stage's PipelineStagePlan, -1 every stage's (a master).
/// Errors: those of PipelineParallel's constructor (pipeline_parallel.h) and build_pipeline_stages.
PipelinePlan make_pipeline_plan(const std::string& onnx_path, const TrainingOptions& opts,
                                const PipelinePlanOptions& popts, int rank);

}  // namespace kiln::distributed
