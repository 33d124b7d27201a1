#include "compiler/optimizer_spec.h"

namespace kiln::compiler {

autodiff::OptimizerSpec optimizer_spec(const OptimizerOptions& o) {
    autodiff::OptimizerSpec s;
    s.kind = o.kind;
    s.momentum = o.momentum;
    s.nesterov = o.nesterov;
    s.beta1 = o.beta1;
    s.beta2 = o.beta2;
    s.eps = o.eps;
    s.weight_decay = o.weight_decay;
    s.clip_norm = o.clip_norm;
    return s;
}

}  // namespace kiln::compiler
