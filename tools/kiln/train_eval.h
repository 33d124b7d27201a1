// The per-epoch evaluation of `kiln train`: the mean loss over every held-out record and, for a
// classification loss, the accuracy (argmax over the class axis of the loss output vs labels).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/training.h"
#include "train_data.h"

namespace kiln::cli {

struct EvalResult {
    double loss = 0;
    double accuracy = -1;  // < 0: not a classification loss
    int64_t records = 0;   // records the loss covers
};

/// The sums of an evaluation, batch by batch (the rules of evaluate() below).
class EvalAccumulator {
public:
    EvalAccumulator(const StepInputs& step, std::string loss_kind, size_t output_index)
        : step_(step), loss_kind_(std::move(loss_kind)), output_index_(output_index) {}
    /// One eval step's result `res` on `inputs`, of which the first `valid` records are real.
    void add(const StepResult& res, const std::map<std::string, Tensor>& inputs, int64_t valid);
    EvalResult result() const;

private:
    const StepInputs& step_;
    std::string loss_kind_;
    size_t output_index_;
    double loss_sum_ = 0;
    int64_t correct_ = 0, positions_ = 0, records_ = 0;
};

/// Runs TrainingSession::eval_step over `data.eval`. Whole batches take the step's loss; the
/// last, padded batch takes the loss of its real records, computed here from the loss output
/// (cross_entropy from logits, nll from log-probabilities); for other losses it is skipped
/// (EvalResult::records tells).
EvalResult evaluate(TrainingSession& session, TrainData& data, const StepInputs& step, const std::string& loss_kind,
                    size_t output_index);

}  // namespace kiln::cli
