// One rank's stage of pipeline-parallel training (pipeline_parallel.h), compiled: its forward
// and backward graphs (pipeline_stage_graph.h), the optimizer update of its parameters (the
// autodiff apply graph, autodiff/training_graph.h, for this stage's parameters only), the
// parameters, their optimizer state, and the gradients accumulated over a step's microbatches.
// No MPI here: the schedule (pipeline_parallel.cc) moves the tensors; an in-process driver could
// run the stages one after another as well.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/pipeline_stage_graph.h"
#include "kiln/training.h"
#include "runtime/model_runner.h"

namespace kiln::distributed {

class PipelineStage {
public:
    using Values = std::map<std::string, Tensor>;

    /// Compiles `graph`'s forward (not on the loss stage), backward and `apply` (stage_apply_graph;
    /// ignored for a stage without parameters) with `opts` (threads, kernels, optimizer);
    /// `initial` holds at least the stage's parameters.
    PipelineStage(PipelineStageGraph graph, autodiff::TrainingGraph apply, const TrainingOptions& opts,
                  const std::map<std::string, Tensor>& initial);
    ~PipelineStage();
    PipelineStage(const PipelineStage&) = delete;
    PipelineStage& operator=(const PipelineStage&) = delete;

    /// The forward graph on `feeds` (batch inputs and received activations by input name; the
    /// parameters are the stage's): the values it sends, in send_keys order.
    std::vector<Tensor> forward(const Values& feeds);
    /// Told a parameter's name and its gradient sum once the sum is final (gradients()'s tensor).
    using GradientReady = std::function<void(const std::string& name, const Tensor& sum)>;
    /// The backward graph on `feeds` (as forward, plus the seed inputs): adds the parameters'
    /// gradients into the step's sums (in call order), returns the received inputs' gradients by
    /// input name and sets `*loss` on the loss stage. With `on_sum` (the step's last backward),
    /// each parameter's sum is added as soon as the run has written its gradient, while later
    /// steps of the graph still run (runtime/output_ready.h), and `on_sum` is told it, from the
    /// executor's thread (or the caller's at the end); it must not throw.
    Values backward(const Values& feeds, double* loss, const GradientReady* on_sum = nullptr);
    /// The eval graph on `feeds` (as forward): the values it sends, or on the loss stage the
    /// loss and the model output. Compiled on its first call.
    std::vector<Tensor> evaluate(const Values& feeds);
    /// The step's gradients summed over its microbatches so far, by parameter name (after the
    /// backwards, before apply): data parallelism averages them in place across the replicas
    /// of this stage (pipeline_parallel.h). Empty on a stage without parameters.
    Values& gradients() { return grads_; }
    /// The sum of the squares of the step's summed gradients (double; 0 for a stage without
    /// parameters): this stage's part of the global gradient norm of clipping.
    double gradient_square_sum() const;
    /// The optimizer on the summed gradients, as step `step` at learning rate `lr`; clears them.
    /// With clipping (OptimizerOptions::clip_norm > 0) the gradients are scaled by `clip_factor`,
    /// min(clip / (global norm + 1e-6), 1) over every stage's gradients (the caller's).
    void apply(int64_t step, double lr, double clip_factor = 1.0);

    const PipelineStageGraph& graph() const { return g_; }
    const std::vector<std::string>& parameter_names() const { return g_.params; }
    const Tensor& parameter(const std::string& name) const;
    /// The optimizer state of the stage's parameters, by autodiff::optimizer_state_name.
    const Values& optimizer_state() const { return state_; }
    /// Replaces the parameters and their optimizer state (a checkpoint's): `params` and `state`
    /// must hold exactly the stage's names, with their dtypes and shapes (kInvalidArgument
    /// naming the tensor otherwise).
    void load_state(const Values& params, const Values& state);
    /// Compute seconds of the last step's calls, summed: forward, backward, apply.
    double forward_s = 0, backward_s = 0, apply_s = 0;

private:
    struct Compiled;
    std::unique_ptr<Compiled> compile(ir::Graph& g);
    std::vector<Tensor> run(Compiled& c, const Values& feeds, const Values& extra,
                            const runtime::RunControls& controls = {});

    PipelineStageGraph g_;
    TrainingOptions opts_;
    std::unique_ptr<runtime::ModelRunner> runner_;
    std::unique_ptr<Compiled> forward_, backward_, apply_, eval_;
    std::vector<std::string> apply_outputs_;  // role keys ("param:W", "state:opt/W/momentum")
    Values params_, state_, grads_;
};

/// The optimizer update of `params` alone (autodiff's apply graph, the clip factor an input:
/// the norm spans the stages), from the model file of `spec`.
autodiff::TrainingGraph stage_apply_graph(const PipelineTrainingSpec& spec, const std::vector<std::string>& params,
                                          const OptimizerOptions& optimizer);

/// sum += t, elementwise (same dtype and shape); an empty `sum` becomes `t`.
void accumulate(Tensor& sum, Tensor t);

}  // namespace kiln::distributed
