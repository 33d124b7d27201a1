// The optimizer of the public training options (kiln/training.h) as autodiff builds it: one
// translation for every training loop (TrainingSession, the pipeline's stages).
#pragma once

#include "autodiff/optimizer.h"
#include "kiln/training.h"

namespace kiln::compiler {

/// `o`'s fields as autodiff's OptimizerSpec (the same names and meanings).
autodiff::OptimizerSpec optimizer_spec(const OptimizerOptions& o);

}  // namespace kiln::compiler
