// Optimizers as graph ops: append_optimizer() writes the update of every parameter into the
// graph from elementwise ops (Mul, Add, Sub, Div, Sqrt), so the fusion pass makes one kernel per
// parameter and the whole step (forward, backward, update) is one compiled graph.
//
// The formulas are PyTorch's torch.optim ones (1.13, single-tensor path), in its order:
//   clip (torch.nn.utils.clip_grad_norm_): norm = sqrt(sum_i |g_i|^2),
//        g_i *= min(clip / (norm + 1e-6), 1)                        (before weight decay)
//   sgd:      d = g + wd * p;  momentum > 0: buf = momentum * buf + d (buf starts at zero,
//             so the first step gives buf = d as PyTorch's), d = nesterov ? d + momentum * buf
//             : buf;  p = p - lr * d
//   adam:     g = g + wd * p;  m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//             p = p - step_size * m / (sqrt(v) / bc2_sqrt + eps)
//             with step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t), t = step + 1
//   adamw:    p = p * (1 - lr * wd), then adam without the L2 term.
// Everything that changes from step to step (lr, step_size, bc2_sqrt, the AdamW decay factor) is
// a rank-0 f32 graph input whose value optimizer_scalar_values() computes on the host, so a
// schedule never recompiles. The optimizer state (momentum buffers, Adam's m and v) are graph
// inputs named "opt/<param>/<slot>" whose updated values append_optimizer() returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::autodiff {

/// The optimizer's hyper-parameters (kiln::OptimizerOptions without the learning rate, which is
/// a per-step input; autodiff does not see the public API).
struct OptimizerSpec {
    std::string kind = "sgd";  // "sgd", "adam", "adamw"
    double momentum = 0.0;
    bool nesterov = false;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weight_decay = 0.0;
    double clip_norm = 0.0;  // 0: no clipping
    /// With clip_norm > 0: the factor min(clip / (norm + 1e-6), 1) is not computed from the
    /// graph's gradients but read from the f32 scalar input kClipFactorInput, computed by the
    /// caller over gradients the graph does not hold (a pipeline's stages, which each update
    /// only their own parameters but clip by the norm over every stage's gradients).
    bool clip_from_input = false;
};

/// The graph input of OptimizerSpec::clip_from_input.
inline constexpr const char* kClipFactorInput = "opt/clip_factor";

/// The clipping factor min(clip_norm / (norm + 1e-6), 1) of a global gradient norm, as the
/// graph computes it (torch.nn.utils.clip_grad_norm_), in double.
double clip_factor_of_norm(double clip_norm, double norm);

/// kInvalidArgument for an unknown kind or an out-of-range value (betas, eps, momentum,
/// weight_decay, clip_norm, nesterov without momentum), naming the option with its value.
void check_optimizer_options(const OptimizerSpec& o);

/// The state slots each parameter carries: none (plain sgd), {"momentum"}, {"exp_avg",
/// "exp_avg_sq"} (adam, adamw).
std::vector<std::string> optimizer_state_slots(const OptimizerSpec& o);

/// The graph input holding slot `slot` of parameter `param`: "opt/<param>/<slot>".
std::string optimizer_state_name(const std::string& param, const std::string& slot);

/// Names of the per-step scalar inputs the update reads ("opt/lr", "opt/step_size", ...).
std::vector<std::string> optimizer_scalar_names(const OptimizerSpec& o);
/// Their values (same order) for 0-based step `step` at learning rate `lr`.
std::vector<double> optimizer_scalar_values(const OptimizerSpec& o, int64_t step, double lr);

struct OptimizerGraph {
    /// The rank-0 f32 scalar inputs added, in optimizer_scalar_names() order.
    std::vector<ir::Value*> scalars;
    /// Per parameter, per slot: the state inputs added, and their updated values.
    std::vector<std::vector<ir::Value*>> state, new_state;
    /// Per parameter: its updated value.
    std::vector<ir::Value*> new_params;
};

/// Appends the optimizer update of `params` given their gradients `grads` (same order, same
/// types) to `g`: adds the scalar and state inputs (graph inputs, after the existing ones) and
/// the update nodes; sets no outputs. Parameter names are the params' value names.
OptimizerGraph append_optimizer(ir::Graph& g, const OptimizerSpec& o, const std::vector<ir::Value*>& params,
                                const std::vector<ir::Value*>& grads);

}  // namespace kiln::autodiff
