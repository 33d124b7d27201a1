// The subcommands of the `kiln` program. Each add_*_command registers its options on `app` and,
// when that subcommand is the one parsed, stores in `action` the work to run after parsing. main.cc
// runs the action outside CLI11's parse so that parse errors (exit 2) and model errors (exit 1)
// stay apart.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

/// Work of a parsed subcommand; returns the process exit code.
using CommandAction = std::function<int()>;

/// The -O0..-O3 option (graph optimization level; default -O3) of run, inspect and test-onnx.
inline void add_opt_level_option(CLI::App* sub, int& level) {
    sub->add_option("-O", level, "Optimization level 0..3 (-O0: each node one kernel; -O3: fold, simplify, fuse)")
        ->capture_default_str()
        ->check(CLI::Range(0, 3));
}

inline void add_kernels_option(CLI::App* sub, std::string& kernels, const char* flag = "--kernels") {
    sub->add_option(flag, kernels,
                    "Who computes conv/matmul: generated (Kiln's kernels), dnnl (oneDNN where it can), auto")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "generated", "dnnl"}));
}

inline void add_tuning_log_option(CLI::App* sub, std::string& path) {
    sub->add_option("--tuning-log", path,
                    "Apply the best records of this tuning log (kiln tune); default: the log in the kernel cache "
                    "directory when it exists; 'none': untuned")
        ->type_name("FILE.jsonl");
}

/// `kiln run MODEL.onnx ...`: run a model on given or random inputs and time it.
void add_run_command(CLI::App& app, CommandAction& action);
/// `kiln compile MODEL.onnx -o MODEL.kiln ...`: compile ahead of time into one artifact.
void add_compile_command(CLI::App& app, CommandAction& action);
/// `kiln inspect MODEL.onnx ...`: print the IR and every kernel.
void add_inspect_command(CLI::App& app, CommandAction& action);
/// `kiln test-onnx DIR ...`: run ONNX backend node tests, one forked child per test.
void add_test_onnx_command(CLI::App& app, CommandAction& action);
/// `kiln ops [--markdown]`: list the operators Kiln implements.
void add_ops_command(CLI::App& app, CommandAction& action);
/// `kiln tune MODEL.onnx ...`: search each workload's fastest kernel, append to the tuning log.
/// Also registers the hidden `kiln tune-worker` (the measurement process, tune/measure.h).
void add_tune_command(CLI::App& app, CommandAction& action);
/// `kiln rpc-server [--host H] [--port P] [--threads N]`: measure tuning candidates for remote tuners.
void add_rpc_server_command(CLI::App& app, CommandAction& action);
/// `kiln serve --model-repository DIR ...`: the KServe v2 inference server (HTTP, gRPC, metrics).
void add_serve_command(CLI::App& app, CommandAction& action);
/// `kiln train MODEL.onnx --data DATA ...`: train a model's initializers (docs/training.md).
void add_train_command(CLI::App& app, CommandAction& action);
/// `kiln quantize MODEL.onnx -o OUT.onnx --calibration DATA ...`: int8 QDQ model (docs/quantization.md).
void add_quantize_command(CLI::App& app, CommandAction& action);

}  // namespace kiln::cli
