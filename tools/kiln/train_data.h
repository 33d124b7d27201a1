// The data side of `kiln train`: opens the training (and eval) records, appends the
// augmentation stages (normalize, random crop, random flip) and the checks (label range, dtype),
// and turns a batch of data fields into the inputs of the training step.
//
// Which data field feeds which step input: a field with the input's name; else, for the model's
// first input, --input-name or the one field left besides the labels. The labels input reads
// --label-name, else the field "labels", "label" or "y".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/pipeline.h"
#include "kiln/session.h"

namespace kiln::cli {

struct DataArgs {
    std::string data;
    std::string eval_data;
    double eval_split = 0;  // the last fraction of --data's records, held out (when no --eval-data)
    std::string input_name;
    std::string label_name;
    std::vector<double> normalize;     // MEAN,STD or M1..Mc,S1..Sc
    std::vector<int64_t> random_crop;  // H,W,PAD
    bool random_flip = false;
    bool shuffle = true;
    uint64_t seed = 0;
    int64_t batch_size = 32;
    int map_threads = 0;
    /// Data-parallel: this rank's shard of each global batch (data/pipeline.h).
    int shard_count = 1, shard_index = 0;
};

/// What the step takes: its inputs (TrainingSession::batch_inputs()), which of them is the
/// labels ("" for none), and the class count of a classification loss (0 otherwise).
struct StepInputs {
    std::vector<TensorInfo> inputs;
    std::string labels;
    int64_t num_classes = 0;
};

struct TrainData {
    std::shared_ptr<data::Source> train_source, eval_source;  // eval_source null: no eval
    std::unique_ptr<data::Pipeline> train, eval;
    /// Step input name -> data field.
    std::map<std::string, std::string> field_of;
    std::string describe;  // a line per source, for the start of the run
};

/// Opens --data (and --eval-data, or splits --eval-split off --data): the sources only, so that
/// the step count is known before the training step compiles.
TrainData open_train_sources(const DataArgs& args);

/// Maps fields to step inputs and builds both pipelines. Errors name the file, the field and
/// the step input (expected vs got).
void build_pipelines(const DataArgs& args, const StepInputs& step, TrainData& data);

/// The step's inputs from a batch: fields renamed and checked against the step input shapes.
/// A batch of fewer records than the step's batch size (the eval set's last) is padded by
/// repeating its records; `*valid` gets the count of real records.
std::map<std::string, Tensor> step_batch(const data::Batch& batch, const TrainData& data, const StepInputs& step,
                                         int64_t* valid = nullptr);

}  // namespace kiln::cli
