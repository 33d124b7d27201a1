// A `kiln train` checkpoint's `extra` entries (compiler/training_checkpoint.h): the trainer's
// data position (epoch, batches done in it), the smoothed loss, the metrics rows written so far,
// and what the position depends on (seed, shuffle, batch size, data-parallel rank count). Shared
// by the single-process, data-parallel and parameter-server loop (train_command.cc) and the
// pipeline-parallel one (train_pipeline.cc), so either can resume the other's checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "train_args.h"

namespace kiln::cli {

/// DIR/checkpoint.kiln of --checkpoint-dir ("" without one). kInvalidArgument for
/// --checkpoint-every or --resume without --checkpoint-dir, and for --resume with no checkpoint
/// there (nothing is started silently from scratch).
std::string checkpoint_path(const TrainArgs& a);

/// The checkpoint's `extra`: the trainer's position and metrics.
struct Position {
    int64_t epoch = 0, batch = 0;
    double ema = 0;  // the smoothed loss, undebiased, and the steps it has seen
    int64_t ema_steps = 0;
    int64_t csv_rows = 0;
};

/// The smoothing factor of the printed loss (an exponential moving average).
constexpr double kSmoothing = 0.9;

/// `p` and what it depends on in `a`, as checkpoint entries.
std::map<std::string, std::string> position_extra(const Position& p, const TrainArgs& a);

/// The position in a checkpoint's entries (`path` names it in errors). kInvalidArgument when an
/// entry is missing or garbled, or the batch size or data-parallel rank count differs from
/// `a`'s; the checkpoint's seed and shuffle replace `a`'s (with a note when they differ).
Position read_position(const std::map<std::string, std::string>& extra, const std::string& path, TrainArgs& a);

}  // namespace kiln::cli
