// The options of `kiln train` (train_command.cc), shared with the pipeline-parallel loop
// (train_pipeline.cc), and the TrainingOptions they make.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/training.h"
#include "train_data.h"

namespace kiln::cli {

struct TrainArgs {
    std::string model;
    DataArgs data;
    std::vector<std::string> dims;
    std::string loss = "cross_entropy", loss_output;
    std::string optimizer = "sgd";
    double lr = 0.01;
    double momentum = -1;  // not given
    double weight_decay = 0, clip_norm = 0;
    LrSchedule schedule;
    int64_t epochs = 1;
    int threads = 0;
    std::string kernels = "auto";
    std::string recompute = "none", memory_limit;
    std::string checkpoint_dir;
    int64_t checkpoint_every = 0;
    bool resume = false;
    std::string export_path, metrics_csv;
    int64_t log_every = 0;
    bool data_parallel = false;
    double bucket_mb = -1;  // -1: DataParallelOptions::from_env's
    bool no_overlap = false;
    bool sync_batch_norm = false;  // --data-parallel: BatchNormalization over the global batch
    int parameter_servers = 0;  // 0: not a parameter-server run
    std::string ps_mode = "sync";
    int staleness = 2;
    bool pipeline_parallel = false;
    int pipeline_stages = 0;  // --pipeline-parallel: stages per replica (0: every rank, one replica)
    int microbatches = 1;
    bool rematerialize = false;  // --pipeline-parallel: recompute each stage's forward in its backward
    std::string pipeline_schedule = "gpipe";  // --pipeline-parallel: gpipe or 1f1b
    std::vector<std::string> stages;  // --stage NODE=RANK,... (pipeline-parallel)
    std::string dispatch = "replicated";  // --pipeline-parallel: replicated (every rank reads the model) or master
    int rank = 0;  // in the MPI job (0 outside one): rank 0 prints and writes
};

/// The TrainingOptions of `a`, with the model's dims and the run's total step count (the cosine
/// schedule's length). kInvalidArgument for contradictory optimizer or recompute options.
TrainingOptions training_options(const TrainArgs& a, std::map<std::string, int64_t> dims, int64_t total_steps);

}  // namespace kiln::cli
