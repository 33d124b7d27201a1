// The graphs of pipeline-parallel training (distributed/pipeline_parallel.h): a model's training
// form split into one stage per rank, each with a forward graph and a backward graph.
//
// The model is imported with its batch dim bound to the microbatch, put in its training form
// (autodiff::convert_for_training: the parameters become graph inputs), its outputs reduced to
// the one the loss reads, and split by the partition (partition.h: rank_assignment's annotated
// or cost-balanced split, KilnSend/KilnRecv on crossing edges, lowered by lower_transfers.h).
// For stage r:
//  - forward: the rank graph as the partition cut it. Inputs: the batch inputs it reads, its
//    parameters, the activations it receives; outputs: the activations it sends.
//  - backward: the same rank graph again, then autodiff::vjp from the values it sends, seeded by
//    one input per sent value (the gradient the later stages send back), and on the last stage
//    from the loss (appended here, autodiff::append_loss), seeded by the constant 1/M: the loss
//    of a step is the mean of the M microbatches' mean losses, so the stage's gradients summed
//    over the microbatches are the global batch's. Outputs: the loss (last stage), d/d each of
//    its parameters, d/d each activation it receives (sent back to where it came from).
// Two ways to give the backward the forward's values (PipelineTrainingSpec::rematerialize):
//  - stash (the default): the backward graph above is split in two with the partition itself,
//    its forward nodes on one side and autodiff's (named "grad/...") on the other. The forward
//    graph then also returns every value the backward reads (the stash, kept per microbatch
//    until its backward), and the backward graph takes them as inputs: no forward is computed
//    twice, at the cost of M microbatches' activations in memory.
//  - rematerialize (GPipe's own): the backward graph computes the stage's forward again from
//    the activations the stage received, which is all a stage keeps per microbatch.
// The loss stage runs forward, loss and backward of a microbatch as one graph either way.
// For evaluation each stage also has an eval graph: the rank graph alone (the forward, with
// Dropout back in inference mode) returning the values it sends, and on the last stage the loss
// and the loss's model output instead.
//
// Refused (kUnsupported or kInvalidArgument, naming what and why): BatchNormalization (its batch
// statistics would be per microbatch, not the global batch's), a parameter read on two stages
// (its gradient would be split), a loss not computed on the last rank, a stage with no nodes
// (more ranks than stages) or one that sends nothing onwards.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autodiff/training_graph.h"
#include "distributed/rank_assignment.h"
#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

/// What a pipeline's stages are made from.
struct PipelineTrainingSpec {
    std::string onnx_path;
    /// The model's dims with the batch dim bound to the microbatch (global batch / M).
    std::map<std::string, int64_t> dims;
    autodiff::LossSpec loss;
    std::vector<std::string> trainable;  // empty: every float initializer
    int num_ranks = 2;
    StageMap stages;  // empty (and no kiln.rank attribute): the cost-balanced split
    int microbatches = 1;
    uint64_t seed = 0;  // Dropout's (autodiff::convert_for_training)
    /// Recompute each stage's forward in its backward instead of stashing its values.
    bool rematerialize = false;
};

/// One stage's graphs (see the file comment).
struct PipelineStageGraph {
    int rank = 0;
    bool computes_loss = false;  // the last stage: no forward graph, the backward appends the loss
    ir::Graph forward, backward;
    /// The stage's parameters (graph inputs of both graphs), model order.
    std::vector<std::string> params;
    /// Input name -> the partition's key (step unset) of the transfer that feeds it.
    std::map<std::string, std::string> recv_keys;
    /// Per forward output: the partition keys it is sent under, and the backward's seed input.
    std::vector<std::vector<std::string>> send_keys;
    std::vector<std::string> seed_inputs;
    /// The forward graph's output names: the sent values (send_keys order), then the stash.
    std::vector<std::string> forward_outputs;
    /// Per backward output: "loss", "grad:<param>" or "input_grad:<received input>".
    std::vector<std::string> backward_outputs;
    /// Evaluation's forward (file comment): inputs as the forward's; outputs the sent values
    /// (send_keys order), or on the last stage the loss and then the model output it reads.
    ir::Graph eval;
    double estimated_seconds = 0;  // the forward's roofline (stage_cost.h)
};

struct PipelineStages {
    std::vector<PipelineStageGraph> stages;  // stages[r].rank == r
    std::vector<std::string> params;         // every trained parameter, model order
    std::map<std::string, Tensor> initial;   // their values in the model
};

/// Builds every stage (cheap: graphs only; compiling is the caller's). Errors as above.
PipelineStages build_pipeline_stages(const PipelineTrainingSpec& spec);

/// The name of the backward's seed input of sent value `value`.
std::string pipeline_seed_name(const std::string& value);

}  // namespace kiln::distributed
