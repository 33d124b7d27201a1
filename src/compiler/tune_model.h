// Tuning a model: every distinct workload (compiler/workload.h) of the optimized graph whose
// kernel has knobs (te/schedule_config.h) or a oneDNN alternative is searched (tune/search.h)
// and measured (tune/measure.h); every candidate that ran and matched the untuned kernel is
// appended to the tuning log, whose best records compile() then applies (CompileOptions::tuned).
//
// The time budget is spent where it pays: first each workload's untuned kernel, its oneDNN
// alternative and a few candidates are measured; then the remaining budget is split over the
// workloads in proportion to their share of the model's time (untuned time x occurrences), the
// largest first, each stopping early when its best stops improving (unused time goes on):
// tune/task_scheduler.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "tune/measure.h"

namespace kiln::compiler {

struct TuneProgress {
    int workload = 0, workloads = 0;  // 1-based index of the workload being searched
    std::string description;
    int trials = 0;                   // of this workload, measured so far
    double best_gflops = 0;           // of this workload, so far
    double elapsed = 0, budget = 0;   // seconds
};

struct TuneOptions {
    CompileOptions compile;        // dims, opt level, the kernel rule the defaults follow
    tune::MeasureOptions measure;  // threads, repeats, timeout, the measurement program
    double budget_seconds = 300;   // wall time of the whole search
    int max_trials = 64;           // per workload
    int batch = 8;                 // candidates per measurement round
    int patience = 16;             // stop a workload after this many trials without a 1% gain
    std::string log_path;          // appended to (required)
    bool resume = false;           // seed the search with the log's records for this target
    uint64_t seed = 1;
    std::function<void(const TuneProgress&)> progress;
};

struct WorkloadResult {
    std::string key, description;
    int count = 0;               // units of the model that are this workload
    double flops = 0;            // of one call
    double default_seconds = 0;  // the untuned kernel (0 when it failed)
    double best_seconds = 0;     // the best measured (the untuned one when nothing beat it)
    std::string default_knobs, best_knobs;
    int trials = 0, failures = 0;
    std::string first_failure;   // why the first failed candidate failed ("wrong result: ...")
};

struct TuneResult {
    std::vector<WorkloadResult> workloads;  // in descending order of their untuned share
    double seconds = 0;                     // wall time of the search
    std::string target;
};

/// Tunes `g` (optimized in place by the pass pipeline). Never throws for a candidate's failure.
TuneResult tune_graph(ir::Graph& g, const TuneOptions& opts, tune::Measurer& measurer);

}  // namespace kiln::compiler
