// TrainingSession: trains an ONNX model in Kiln (docs/training.md).
//
// The model's float initializers are its parameters (all, or TrainingOptions::trainable). One
// training step — forward, loss, backward (src/autodiff), gradient clipping and the optimizer
// update — is one compiled graph: the parameters and the optimizer state are its inputs and
// their updated values its outputs, and the session keeps them between steps. The learning
// rate is an input of the step, so schedules cost no recompile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/session.h"
#include "kiln/tensor.h"

namespace kiln {

/// The loss a TrainingSession appends to the model.
struct LossOptions {
    /// "cross_entropy" (SoftmaxCrossEntropyLoss of logits and int64 class labels), "nll"
    /// (NegativeLogLikelihoodLoss of log-probabilities), "mse" (mean squared error against float
    /// targets), or "output" (the model's output already is the scalar loss; no labels).
    std::string kind = "cross_entropy";
    /// The model output the loss reads ("" = the first output).
    std::string output;
    /// The name of the labels input the training step takes.
    std::string labels = "labels";
};

struct OptimizerOptions {
    /// "sgd" (with momentum when momentum > 0, Nesterov when nesterov), "adam", "adamw".
    std::string kind = "sgd";
    double lr = 0.01;
    double momentum = 0.0;
    bool nesterov = false;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    /// L2 penalty added to the gradient (sgd, adam) or decoupled decay (adamw), as in PyTorch.
    double weight_decay = 0.0;
    /// Clip gradients by their global L2 norm to at most this (0 = no clipping).
    double clip_norm = 0.0;
};

/// Learning rate as a function of the step (computed on the host, fed to the step graph).
struct LrSchedule {
    /// "constant", "step" (lr * gamma^(step / step_size)), "cosine" (from lr down to min_lr over
    /// total_steps).
    std::string kind = "constant";
    int64_t step_size = 1;
    double gamma = 0.1;
    int64_t total_steps = 0;
    double min_lr = 0.0;
    /// Linear warm-up from 0 to the schedule's value over the first warmup_steps steps.
    int64_t warmup_steps = 0;
    /// The learning rate of step `step` (0-based) for base rate `lr`.
    double at(int64_t step, double lr) const;
};

struct TrainingOptions {
    /// Threads, kernels, optimization level, dims (the batch dimension!), memory budget.
    SessionOptions session;
    LossOptions loss;
    OptimizerOptions optimizer;
    LrSchedule schedule;
    /// Initializers to train ("" = every floating-point initializer).
    std::vector<std::string> trainable;
    /// Activation recomputation: "none", "sqrt" (checkpoint every ~sqrt(N) forward nodes),
    /// "auto" (the fewest recomputed segments that fit recompute_memory_limit bytes).
    std::string recompute = "none";
    size_t recompute_memory_limit = 0;
    /// Seed of the step's randomness (Dropout masks): step s uses seed + s.
    uint64_t seed = 0;
    /// What create() compiles: the fused train step (false), or the gradients and apply graphs
    /// (true) for a caller that steps through gradients() + apply_gradients() — data-parallel
    /// training averages the gradients in between. The others compile on first use.
    bool split_step = false;
};

/// Told a parameter's gradient (by parameter name) as soon as the backward pass has written it
/// for good (TrainingSession::gradients_as_ready).
using GradientReadyFn = std::function<void(const std::string& name, const Tensor& grad)>;

struct StepResult {
    double loss = 0;
    /// The model's outputs of this batch (logits for accuracy), in model output order.
    std::vector<Tensor> outputs;
};

class TrainingSession {
public:
    /// Imports the ONNX model and compiles its training step for the shapes TrainingOptions::
    /// session.dims binds. Bad options (unknown optimizer, loss output or trainable name, a loss
    /// kind the output's type cannot take) are kInvalidArgument errors.
    static std::unique_ptr<TrainingSession> create(const std::string& onnx_path, const TrainingOptions& opts);
    virtual ~TrainingSession() = default;

    /// The model's inputs plus the labels input (when the loss takes labels): what a batch holds.
    virtual const std::vector<TensorInfo>& batch_inputs() const = 0;
    /// Forward, loss, backward and the optimizer update at the scheduled learning rate; advances
    /// step() by one.
    virtual StepResult train_step(const std::map<std::string, Tensor>& batch) = 0;
    /// Forward and loss only (BatchNormalization in inference mode); parameters unchanged.
    virtual StepResult eval_step(const std::map<std::string, Tensor>& batch) = 0;
    /// Forward, loss and backward: the loss and d loss / d parameter by parameter name, with no
    /// update (for gradient accumulation and for checking gradients).
    virtual std::map<std::string, Tensor> gradients(const std::map<std::string, Tensor>& batch, double* loss = nullptr) = 0;
    /// gradients(), telling `ready` each gradient as soon as the step that last touches it is
    /// done, while the rest of the backward pass still runs: data-parallel training starts a
    /// bucket's allreduce from it. `ready` is called before this returns, from a runtime thread
    /// (several at once under the dataflow executor), and must not throw; the tensor shares its
    /// storage with the returned map's and the run no longer reads or writes it, so `ready` may
    /// start changing it in place. The default (a session without the runtime's reports) calls
    /// `ready` for every gradient after gradients().
    virtual std::map<std::string, Tensor> gradients_as_ready(const std::map<std::string, Tensor>& batch, double* loss,
                                                             const GradientReadyFn& ready) {
        std::map<std::string, Tensor> grads = gradients(batch, loss);
        for (const auto& [name, g] : grads) ready(name, g);
        return grads;
    }
    /// Applies the optimizer to the given gradients (by parameter name); advances step().
    virtual void apply_gradients(const std::map<std::string, Tensor>& grads) = 0;

    virtual int64_t step() const = 0;
    /// Sets the learning rate of the following steps, replacing the schedule's value (ONNX
    /// Runtime's Optimizer.set_learning_rate: a host-side schedule calls it before each step).
    /// The default is for implementations without it (kUnsupported).
    virtual void set_learning_rate(double lr) {
        (void)lr;
        KILN_THROW(kUnsupported) << "this TrainingSession cannot change its learning rate";
    }
    /// The learning rate the next step uses (the schedule's, or the one set_learning_rate set).
    virtual double learning_rate() const { KILN_THROW(kUnsupported) << "this TrainingSession has no learning_rate()"; }
    /// Names of the trained parameters, in model order.
    virtual std::vector<std::string> parameter_names() const = 0;
    virtual Tensor parameter(const std::string& name) const = 0;
    /// Replaces a parameter's value (same dtype and shape, else kInvalidArgument).
    virtual void set_parameter(const std::string& name, const Tensor& value) = 0;

    /// Everything a resumed run needs: parameters, non-trained state (BatchNormalization running
    /// statistics), optimizer state and the step counter, plus `extra` (the trainer's data
    /// position). Written to a temporary file, synced, then renamed over `path`: a crash while
    /// writing leaves the previous checkpoint intact.
    virtual void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra = {}) const = 0;
    /// Restores a checkpoint written by save_checkpoint of the same model and optimizer (a
    /// mismatch names the tensor, expected vs got); returns its `extra`.
    virtual std::map<std::string, std::string> load_checkpoint(const std::string& path) = 0;
    /// Writes the model with its current parameters (and running statistics) as ONNX: the
    /// original graph, initializers replaced; ONNX Runtime runs it.
    virtual void export_onnx(const std::string& path) const = 0;

    /// The training step's memory plan (what `kiln inspect --memory` prints for it).
    virtual std::string memory_report() = 0;
    /// Peak bytes of the training step's planned intermediates (the memory plan's arena).
    virtual size_t planned_peak_bytes() = 0;
};

}  // namespace kiln
