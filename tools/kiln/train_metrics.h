// The metrics CSV of `kiln train`: one row per optimizer step (its batch's loss) and one per
// evaluation (train_loss empty), columns epoch, step, train_loss, eval_loss, eval_accuracy, lr,
// samples_per_s. Every row is flushed as it is written. A resumed run keeps the rows its
// checkpoint had counted and drops the later ones (their steps run again), so the file reads as
// one uninterrupted run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace kiln::cli {

class MetricsCsv {
public:
    /// Starts `path` afresh (header only), or, with `keep_rows`, keeps the header and that many
    /// rows of the file there (a checkpoint's count; kInvalidArgument if the file has fewer).
    MetricsCsv(const std::string& path, std::optional<int64_t> keep_rows);
    ~MetricsCsv();
    MetricsCsv(const MetricsCsv&) = delete;
    MetricsCsv& operator=(const MetricsCsv&) = delete;

    /// Empty optionals are written as empty fields. `epoch` is 1-based, `step` counts steps done.
    void row(int64_t epoch, int64_t step, std::optional<double> train_loss, std::optional<double> eval_loss,
             std::optional<double> eval_accuracy, double lr, double samples_per_s);
    int64_t rows() const { return rows_; }

private:
    std::string path_;
    std::FILE* file_ = nullptr;
    int64_t rows_ = 0;
};

}  // namespace kiln::cli
