// LrSchedule::at (include/kiln/training.h): the learning rate of a step, on the host.
//   constant: lr
//   step:     lr * gamma^floor(step / step_size)
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * min(step, total_steps) / total_steps)) / 2
//   warm-up:  for step < warmup_steps the value above times step / warmup_steps (a linear ramp
//             from 0, as Hugging Face's get_*_schedule_with_warmup).
#include <cmath>

#include "kiln/training.h"
#include "support/error.h"

namespace kiln {

double LrSchedule::at(int64_t step, double lr) const {
    KILN_CHECK(step >= 0, kInvalidArgument) << "learning-rate schedule: step must be >= 0, got " << step;
    KILN_CHECK(warmup_steps >= 0, kInvalidArgument) << "learning-rate schedule: warmup_steps must be >= 0, got " << warmup_steps;
    double v = lr;
    if (kind == "constant") {
    } else if (kind == "step") {
        KILN_CHECK(step_size >= 1, kInvalidArgument) << "learning-rate schedule step: step_size must be >= 1, got " << step_size;
        KILN_CHECK(gamma > 0 && std::isfinite(gamma), kInvalidArgument)
            << "learning-rate schedule step: gamma must be > 0, got " << gamma;
        v = lr * std::pow(gamma, static_cast<double>(step / step_size));
    } else if (kind == "cosine") {
        KILN_CHECK(total_steps >= 1, kInvalidArgument)
            << "learning-rate schedule cosine: total_steps must be >= 1, got " << total_steps;
        KILN_CHECK(min_lr >= 0 && min_lr <= lr, kInvalidArgument)
            << "learning-rate schedule cosine: min_lr must be in [0, lr=" << lr << "], got " << min_lr;
        const double t = static_cast<double>(std::min(step, total_steps)) / static_cast<double>(total_steps);
        v = min_lr + (lr - min_lr) * (1.0 + std::cos(M_PI * t)) / 2.0;
    } else {
        KILN_THROW(kInvalidArgument) << "learning-rate schedule must be constant, step or cosine, got '" << kind << "'";
    }
    if (step < warmup_steps) v *= static_cast<double>(step) / static_cast<double>(warmup_steps);
    return v;
}

}  // namespace kiln
