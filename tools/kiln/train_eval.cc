// Evaluation over the held-out records (train_eval.h).
#include "train_eval.h"

#include <cmath>
#include <limits>

#include "kiln/error.h"

namespace kiln::cli {
namespace {

/// Per-record sums over the first `valid` records of a classification output [B, C, d...] and
/// labels [B, d...]: correct argmaxes, positions, and the loss (when `with_loss`).
struct ClassStats {
    int64_t correct = 0, positions = 0;
    double loss_sum = 0;
};

ClassStats class_stats(const Tensor& out, const Tensor& labels, int64_t valid, bool logits, bool with_loss) {
    ClassStats s;
    KILN_CHECK(out.shape().size() >= 2, kInvalidArgument)
        << "accuracy: the loss output has shape " << shape_str(out.shape()) << ", expected [N, C, ...]";
    int64_t batch = out.shape()[0], classes = out.shape()[1];
    int64_t inner = out.numel() / (batch * classes);
    KILN_CHECK(labels.numel() == batch * inner, kInvalidArgument)
        << "accuracy: labels " << shape_str(labels.shape()) << " do not match the loss output " << shape_str(out.shape());
    for (int64_t n = 0; n < valid; ++n)
        for (int64_t i = 0; i < inner; ++i) {
            auto at = [&](int64_t c) { return out.get_f64((n * classes + c) * inner + i); };
            int64_t best = 0;
            double max = at(0);
            for (int64_t c = 1; c < classes; ++c)
                if (at(c) > max) max = at(c), best = c;
            int64_t label = labels.get_i64(n * inner + i);
            s.correct += best == label;
            ++s.positions;
            if (!with_loss) continue;
            if (logits) {  // -log softmax(x)[label], stable: log sum exp(x - max) - (x[label] - max)
                double sum = 0;
                for (int64_t c = 0; c < classes; ++c) sum += std::exp(at(c) - max);
                s.loss_sum += std::log(sum) - (at(label) - max);
            } else {
                s.loss_sum -= at(label);
            }
        }
    return s;
}

}  // namespace

void EvalAccumulator::add(const StepResult& res, const std::map<std::string, Tensor>& inputs, int64_t valid) {
    const bool classification = loss_kind_ == "cross_entropy" || loss_kind_ == "nll";
    const int64_t full = inputs.begin()->second.shape()[0];
    ClassStats s;
    if (classification) {
        KILN_CHECK(output_index_ < res.outputs.size(), kInternal)
            << "bug in Kiln: the eval step returned " << res.outputs.size() << " outputs";
        s = class_stats(res.outputs[output_index_], inputs.at(step_.labels), valid, loss_kind_ == "cross_entropy",
                        valid < full);
        correct_ += s.correct;
        positions_ += s.positions;
    }
    if (valid == full) {
        loss_sum_ += res.loss * static_cast<double>(valid);
        records_ += valid;
    } else if (classification) {
        // The step's loss is a mean over positions; s.loss_sum / positions-per-record is the
        // same mean for the real records only.
        loss_sum_ += s.loss_sum / static_cast<double>(s.positions / valid);
        records_ += valid;
    }
}

EvalResult EvalAccumulator::result() const {
    EvalResult r;
    r.records = records_;
    r.loss = records_ ? loss_sum_ / static_cast<double>(records_) : std::numeric_limits<double>::quiet_NaN();
    if (loss_kind_ == "cross_entropy" || loss_kind_ == "nll")
        r.accuracy = positions_ ? static_cast<double>(correct_) / static_cast<double>(positions_) : 0;
    return r;
}

EvalResult evaluate(TrainingSession& session, TrainData& data, const StepInputs& step, const std::string& loss_kind,
                    size_t output_index) {
    EvalAccumulator acc(step, loss_kind, output_index);
    data.eval->start_epoch(0);
    while (auto batch = data.eval->next()) {
        int64_t valid = 0;
        std::map<std::string, Tensor> inputs = step_batch(*batch, data, step, &valid);
        acc.add(session.eval_step(inputs), inputs, valid);
    }
    return acc.result();
}

}  // namespace kiln::cli
