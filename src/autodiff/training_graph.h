// The graphs of a training session, built from an imported model graph.
//
// From the model (its shapes bound and inferred):
//  - the trainable float initializers (parameters) and the BatchNormalization running
//    statistics become graph inputs named as the initializers, so no pass folds or packs them
//    and their values live in the session between steps;
//  - in the training graphs BatchNormalization runs in training mode (batch statistics; its
//    extra outputs are the updated running mean/var, momentum as in ONNX: running = running *
//    momentum + batch * (1 - momentum)) and Dropout in training mode (a constant true
//    training_mode input);
//  - the loss is appended (SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss of the chosen
//    output and an int64 labels input, mean squared error against a float labels input, or the
//    output itself), reduction mean;
//  - autodiff::differentiate() appends the backward nodes, append_optimizer() the update.
// Four graphs come from it (TrainingGraphKind). Each graph's outputs are described by role keys
// (TrainingGraph::outputs); its inputs are named, and a name is one of: a batch input (the
// model's inputs and the labels), a parameter, a running statistic, an optimizer state
// ("opt/<param>/<slot>"), a step scalar ("opt/lr", ...), or in the apply graph a gradient
// ("grad/<param>").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/optimizer.h"
#include "ir/graph.h"

namespace kiln::autodiff {

struct LossSpec {
    std::string kind = "cross_entropy";  // "cross_entropy", "nll", "mse", "output"
    std::string output;                  // the model output the loss reads ("" = the first)
    std::string labels = "labels";       // the labels input's name
};

/// What a model trains: parameters and running statistics, by initializer name, model order.
struct ModelState {
    std::vector<std::string> params;
    std::vector<std::string> stats;
};

/// The parameters of `g`: `requested` when not empty (each must name a floating-point
/// initializer that is no running statistic, else kInvalidArgument), otherwise every floating-
/// point initializer among `initializers` (the ONNX model's initializer names) that some node
/// (or an If/Loop/Scan region, by name) reads as a differentiable input (not a shape, a Reshape target or a BatchNormalization
/// running statistic). The stats are the initializers BatchNormalization reads as input_mean /
/// input_var.
ModelState find_model_state(const ir::Graph& g, const std::vector<std::string>& initializers,
                            const std::vector<std::string>& requested);

/// Checks the loss options against the model graph (kInvalidArgument: unknown kind or output, a
/// loss kind the output's type cannot take, a labels name that is already a model input).
void check_loss(const ir::Graph& g, const LossSpec& loss);

enum class TrainingGraphKind {
    kTrainStep,  // forward + loss + backward + optimizer update
    kEval,       // forward + loss, BatchNormalization in inference mode
    kGradients,  // forward + loss + backward: the gradients as outputs
    kApply,      // the optimizer alone: parameters and gradients in, updated values out
};

/// Where a training-mode BatchNormalization takes its batch statistics from.
enum class BatchNormStatistics {
    kLocal,   // this process's batch (every rank its own, in data-parallel training)
    kGlobal,  // every rank's batch: AllReduce'd sums (autodiff/sync_batch_norm.h)
};

struct TrainingGraph {
    ir::Graph graph;
    /// One key per graph output, in order: "loss", "output:<i>" (model output i), "param:<name>"
    /// (updated parameter), "state:<input name>" (updated optimizer state), "stat:<name>"
    /// (updated running statistic), "grad:<param>" (a gradient).
    std::vector<std::string> outputs;
    /// With BatchNormStatistics::kGlobal: the BatchNormalization nodes rewritten to global
    /// statistics (their collectives are in the graph); empty otherwise.
    std::vector<std::string> synchronized_batch_norms;
};

/// Builds graph `kind` from `model` (a graph whose input shapes are bound and types inferred; it
/// is consumed). `state` comes from find_model_state on the same model. `seed` (when not 0)
/// becomes the `seed` attribute of each training-mode Dropout that has none, mixed with the
/// node's position so that two Dropouts draw different masks. (The mask is then fixed for the
/// compiled graph; a per-step seed needs Dropout to read its seed as an input.) `bn_stats`
/// kGlobal synchronizes BatchNormalization across ranks in the training kinds (the graph then
/// holds AllReduce nodes and runs cut at them; the eval graph keeps running statistics).
TrainingGraph build_training_graph(ir::Graph model, const ModelState& state, const LossSpec& loss,
                                   const OptimizerSpec& optimizer, TrainingGraphKind kind, uint64_t seed = 0,
                                   BatchNormStatistics bn_stats = BatchNormStatistics::kLocal);

/// The training form of a model graph, as build_training_graph makes it for the training kinds:
/// the parameters and running statistics of `state` become graph inputs of the same names,
/// BatchNormalization and Dropout switch to training mode (Dropout's masks seeded from `seed`
/// when not 0), MaxPool gains its Indices and MatMul by a transposed parameter becomes Gemm.
/// Returns the (running statistic, its updated value) pairs. Pipeline-parallel training
/// (distributed/pipeline_stage_graph.h) splits this form into stages.
std::vector<std::pair<std::string, ir::Value*>> convert_for_training(ir::Graph& g, const ModelState& state, uint64_t seed);

/// Appends `loss` (reduction mean) of model output `out` to `g`, adding the labels input when
/// the loss takes labels; returns the scalar loss ("output": `out` itself).
ir::Value* append_loss(ir::Graph& g, ir::Value* out, const LossSpec& loss);

/// The name of the gradient input of `param` in the apply graph: "grad/<param>".
std::string gradient_input_name(const std::string& param);

/// A role key of TrainingGraph::outputs split at its first ':': ("param", "<name>"); a key
/// without one ("loss") has an empty name.
std::pair<std::string, std::string> split_role_key(const std::string& key);

}  // namespace kiln::autodiff
