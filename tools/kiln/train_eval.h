// The per-epoch evaluation of `kiln train`: the mean loss over every held-out record and, for a
// classification loss, the accuracy (argmax over the class axis of the loss output vs labels).
#pragma once

#include <cstdint>

#include "kiln/training.h"
#include "train_data.h"

namespace kiln::cli {

struct EvalResult {
    double loss = 0;
    double accuracy = -1;  // < 0: not a classification loss
    int64_t records = 0;   // records the loss covers
};

/// Runs TrainingSession::eval_step over `data.eval`. Whole batches take the step's loss; the
/// last, padded batch takes the loss of its real records, computed here from the loss output
/// (cross_entropy from logits, nll from log-probabilities); for other losses it is skipped
/// (EvalResult::records tells).
EvalResult evaluate(TrainingSession& session, TrainData& data, const StepInputs& step, const std::string& loss_kind,
                    size_t output_index);

}  // namespace kiln::cli
