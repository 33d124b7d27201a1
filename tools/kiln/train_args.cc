// training_options (train_args.h).
#include "train_args.h"

#include <cmath>

#include "kiln/error.h"
#include "train_setup.h"

namespace kiln::cli {

TrainingOptions training_options(const TrainArgs& a, std::map<std::string, int64_t> dims, int64_t total_steps) {
    TrainingOptions o;
    o.session.threads = a.threads;
    o.session.kernels = a.kernels;
    o.session.dims = std::move(dims);
    o.loss.kind = a.loss;
    o.loss.output = a.loss_output;
    bool momentum_kind = a.optimizer == "momentum" || a.optimizer == "nesterov";
    o.optimizer.kind = momentum_kind ? "sgd" : a.optimizer;
    o.optimizer.nesterov = a.optimizer == "nesterov";
    o.optimizer.momentum = a.momentum >= 0 ? a.momentum : momentum_kind ? 0.9 : 0.0;  // -1: not given
    KILN_CHECK(!momentum_kind || o.optimizer.momentum > 0, kInvalidArgument)
        << "--optimizer " << a.optimizer << " needs --momentum > 0, got " << o.optimizer.momentum;
    KILN_CHECK(a.lr > 0 && std::isfinite(a.lr), kInvalidArgument) << "--lr must be positive, got " << a.lr;
    o.optimizer.lr = a.lr;
    o.optimizer.weight_decay = a.weight_decay;
    o.optimizer.clip_norm = a.clip_norm;
    o.schedule = a.schedule;
    o.schedule.total_steps = total_steps;
    o.recompute = a.recompute;
    if (!a.memory_limit.empty()) o.recompute_memory_limit = parse_bytes(a.memory_limit, "--memory-limit");
    KILN_CHECK(a.recompute != "auto" || o.recompute_memory_limit > 0, kInvalidArgument)
        << "--recompute auto needs --memory-limit BYTES (the budget the recomputation plan fits)";
    o.seed = a.data.seed;
    return o;
}

}  // namespace kiln::cli
