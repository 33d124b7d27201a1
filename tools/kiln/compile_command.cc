// `kiln compile MODEL.onnx -o MODEL.kiln [--dim N=V]... [-O0..-O3] [--threads T] [--kernels K]
// [--tuning-log FILE|none]`: compiles a model ahead of time into one artifact (compiled kernels
// as one shared library, steps, memory plan, constants) that `kiln run`, kiln::Session::load and
// libkiln_runtime load without the compiler (docs/deploy.md). Prints what went in and the sizes.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler/compile_artifact.h"
#include "name_value_args.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
    std::string model;
    std::string output;
    std::vector<std::string> dims;  // NAME=VALUE
    std::vector<std::string> dim_ranges;  // NAME=MIN..MAX
    int opt_level = 3;
    int threads = 0;
    std::string kernels = "auto";
    std::string tuning_log;
    int jobs = 0;
    bool dataflow = false;
};

std::string megabytes(uint64_t bytes) { return fmt::format("{:.2f} MB", static_cast<double>(bytes) / 1e6); }

int compile_model(const CompileArgs& args) {
    compiler::ArtifactOptions opts;
    opts.session.dims = parse_dims(args.dims);
    opts.session.dim_ranges = parse_dim_ranges(args.dim_ranges);
    opts.session.opt_level = args.opt_level;
    opts.session.threads = args.threads;
    opts.session.kernels = args.kernels;
    opts.session.tuning_log = args.tuning_log;
    if (args.dataflow) opts.session.executor = ExecutorKind::kDataflow;
    opts.compile_jobs = args.jobs;
    compiler::ArtifactReport r = compiler::compile_artifact(args.model, args.output, opts);
    fmt::print("wrote {} in {:.2f} s\n", r.path, r.seconds);
    if (r.metadata.count("segments"))  // a VM program (control flow): one library per segment
        fmt::print("kernels: {} generated in the libraries of {} segments ({} in all), {} oneDNN; {} steps per run of "
                   "every segment once\n",
                   r.kernels, r.metadata["segments"], megabytes(r.library_bytes), r.extern_kernels, r.steps);
    else
        fmt::print("kernels: {} generated in one library of {} ({} compiled now, {} from the cache), {} oneDNN; "
                   "{} steps per run\n",
                   r.kernels, megabytes(r.library_bytes), r.objects_compiled, r.kernels - r.objects_compiled,
                   r.extern_kernels, r.steps);
    fmt::print("size: artifact {}, ONNX model {} ({:.2f}x)\n", megabytes(r.bytes), megabytes(r.model_bytes),
               r.model_bytes ? static_cast<double>(r.bytes) / static_cast<double>(r.model_bytes) : 0.0);
    fmt::print("options: -O{} dims [{}] kernels {} threads {} tuning log {} ({} tuned workloads), {} memory plan\n",
               r.metadata["opt_level"], r.metadata["dims"], r.metadata["kernels"], r.metadata["threads"],
               r.metadata["tuning_log"], r.metadata["tuned_workloads"], r.metadata["memory_plan"]);
    return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, CommandAction& action) {
    auto args = std::make_shared<CompileArgs>();
    CLI::App* sub = app.add_subcommand(
        "compile", "Compile a model ahead of time into one .kiln artifact that runs without the compiler");
    sub->add_option("model", args->model, "ONNX model file")->required();
    sub->add_option("-o,--output", args->output, "The artifact to write")->type_name("FILE.kiln")->required();
    sub->add_option("--dim", args->dims, "Value of a symbolic dimension (repeatable); a dim without one stays symbolic (one artifact for every value)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    sub->add_option("--dim-range", args->dim_ranges,
                    "Declared range of a symbolic dimension, inclusive (repeatable): the artifact refuses a run "
                    "outside it, naming the input")
        ->type_name("NAME=MIN..MAX")
        ->allow_extra_args(false)
        ->check(name_value_check(false));
    add_opt_level_option(sub, args->opt_level);
    sub->add_option("--threads", args->threads,
                    "Intra-op threads whose tuned records apply (0 = all cores); the artifact runs with any count")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    add_kernels_option(sub, args->kernels);
    add_tuning_log_option(sub, args->tuning_log);
    sub->add_option("--jobs", args->jobs, "Parallel C compiler processes (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--dataflow", args->dataflow,
                  "Plan memory so the dataflow executor may run independent kernels at once (a larger arena)");
    sub->callback([args, &action] { action = [args] { return compile_model(*args); }; });
}

}  // namespace kiln::cli
