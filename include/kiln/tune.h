// Auto-tuning (docs/tuning.md): search each workload's fastest kernel of a model and append the
// measurements to a tuning log, whose best records every later compile applies
// (SessionOptions::tuning_log).
//
//   kiln::TuneOptions opts;
//   opts.budget_seconds = 300;
//   kiln::TuneReport r = kiln::tune_model("resnet50.onnx", opts);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

struct TuneStatus {
    int workload = 0, workloads = 0;  // 1-based index of the workload being searched
    std::string description;
    int trials = 0;
    double best_gflops = 0;
    double elapsed_seconds = 0, budget_seconds = 0;
};

struct TuneOptions {
    double budget_seconds = 300;  // wall time of the search
    int max_trials = 64;          // per workload
    int threads = 0;              // intra-op threads the kernels are timed with (0 = all cores)
    std::string log_path;         // "" = the default log in the kernel cache directory
    bool resume = false;          // continue the log's search for this machine (skip measured points)
    std::string rpc;              // "HOST:PORT" of a `kiln rpc-server` to measure on ("" = here)
    std::map<std::string, int64_t> dims;
    std::string kernels = "auto";  // the rule the untuned defaults follow
    int opt_level = 3;
    int batch = 8;                 // candidates per measurement round
    double timeout_seconds = 10;   // per candidate
    int repeats = 5;
    uint64_t seed = 1;
    /// Model runs per variant of the model-level check (0 = skip it): after the search the whole
    /// model runs untuned and tuned, interleaved; the tuned choices stay applied only when the
    /// tuned model is faster (otherwise the log records them as rejected).
    int confirm_runs = 20;
    /// The measurement program (`PROGRAM tune-worker`); "" = the running `kiln` executable.
    std::string worker;
    std::function<void(const TuneStatus&)> progress;
};

struct TunedWorkload {
    std::string key, description;
    int count = 0;        // kernels of the model that are this workload
    double flops = 0;
    double default_seconds = 0, tuned_seconds = 0;
    std::string default_knobs, tuned_knobs;
    int trials = 0, failures = 0;
    std::string first_failure;  // why the first failed candidate failed
};

struct TuneReport {
    std::vector<TunedWorkload> workloads;  // largest untuned share first
    double seconds = 0;
    std::string target;    // the machine measured on
    std::string log_path;  // where the records went
    /// The model-level check (TuneOptions::confirm_runs): medians of the interleaved runs, and
    /// whether the tuned choices stay applied.
    bool confirmed = false;  // the check ran
    double model_untuned_ms = 0, model_tuned_ms = 0;
    bool tuning_kept = true;
    std::string confirmation_note;  // why the check did not run, or what it rejected
};

/// Tunes the ONNX model at `onnx_path`. Candidates that crash, hang or compute a wrong result
/// are counted as failures and never logged; only a bad model or an unreachable rpc server throw.
TuneReport tune_model(const std::string& onnx_path, const TuneOptions& opts);

/// The measurement process's main: a task on stdin, result lines on stdout (tune/measure.h).
int run_tune_worker();

}  // namespace kiln
