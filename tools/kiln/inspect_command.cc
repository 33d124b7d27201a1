// `kiln inspect`: load a model and print Session::inspect() — the IR after the pass pipeline
// (and after chosen passes), the passes' node counts and times, every kernel's loop IR and C
// source — or only the memory plan (--memory) or the kernel list (--kernels). For a compiled
// artifact (`kiln compile`): what it records (metadata, CPU features) and its kernels and steps.
// With --memory --train: the memory plan of a training step (TrainingSession::memory_report).
// With --partition N: each rank's subgraph with its Send/Recv nodes, the transfers and the
// stages' estimated costs (distributed/partition.h). With --place cuda: the graph as the GPU
// compile places it, copies at the device boundaries, and why each node is where it is
// (compiler/cuda_compile.h cuda_placement_report).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler/cuda_compile.h"
#include "device_placement_args.h"
#include "distributed/partition_model.h"
#include "frontend/onnx/importer.h"
#include "kiln/kiln.h"
#include "kiln/training.h"
#include "name_value_args.h"
#include "runtime/artifact.h"
#include "train_setup.h"

namespace kiln::cli {
namespace {

struct InspectArgs {
    std::string model;
    std::vector<std::string> dims;  // NAME=VALUE
    bool memory = false;            // print only the memory plan
    std::string executor = "auto";  // the plan depends on it: concurrent for dataflow
    int opt_level = 3;
    std::string kernel_source = "auto";
    std::vector<std::string> print_after;
    bool print_after_all = false;
    bool kernels = false;  // print only the kernel list
    std::string tuning_log;
    // --memory --train: the training step's plan (TrainingSession::memory_report).
    bool train = false;
    int64_t batch_size = 0;
    std::string loss = "cross_entropy", optimizer = "sgd", recompute = "none", memory_limit;
    int partition = 0;                // > 0: print the model split over this many ranks
    std::vector<std::string> stages;  // with --partition: NODE=RANK,... (else cost-balanced)
    std::string place;                // "cuda": print the GPU compile's placement
    DevicePlacementArgs placement;    // --pin, --pin-op, --place-by-cost
};

const char* role_name(runtime::BufferRole r) {
    switch (r) {
        case runtime::BufferRole::kInput: return "input";
        case runtime::BufferRole::kOutput: return "output";
        case runtime::BufferRole::kConstant: return "constant";
        case runtime::BufferRole::kIntermediate: return "intermediate";
    }
    return "?";
}

/// "[batch,seq,384]": a buffer's shape with its symbolic axes by name.
std::string shape_text(const runtime::Executable& exe, const runtime::BufferDesc& b) {
    std::string s = "[";
    for (size_t k = 0; k < b.shape.size(); ++k) {
        const int di = k < b.dim_of.size() ? b.dim_of[k] : -1;
        s += (k ? "," : "") + (di >= 0 ? exe.dims[static_cast<size_t>(di)] : std::to_string(b.shape[k]));
    }
    return s + "]";
}

/// A program artifact (control flow): its metadata, inputs and outputs, and the VM program.
int inspect_program_artifact(const InspectArgs& args, const runtime::LoadedArtifact& a) {
    fmt::print("// compiled artifact {} (a VM program: control flow)\n", args.model);
    for (const auto& [key, value] : a.info.metadata) fmt::print("{}: {}\n", key, value);
    const runtime::ProgramImage& image = *a.program;
    for (const TensorInfo& t : image.inputs) fmt::print("input {}: {} {}\n", t.name, dtype_name(t.dtype), shape_str(t.shape));
    for (const TensorInfo& t : image.outputs) fmt::print("output {}: {} {}\n", t.name, dtype_name(t.dtype), shape_str(t.shape));
    size_t steps = 0;
    for (size_t k = 0; k < image.executables.size(); ++k) {
        steps += image.executables[k]->steps.size();
        fmt::print("callee #{}: executable '{}' ({} steps)\n", k, image.callee_names[k], image.executables[k]->steps.size());
    }
    fmt::print("{}{} segments, {} steps\n", runtime::vm::program_text(image.program), image.executables.size(), steps);
    return 0;
}

/// The artifact's metadata, CPU features, inputs and outputs, kernels and step count (--memory:
/// the memory plan report recorded when it was compiled).
int inspect_artifact(const InspectArgs& args) {
    runtime::LoadedArtifact a = runtime::load_artifact(args.model);
    if (a.program) return inspect_program_artifact(args, a);
    const runtime::Executable& exe = *a.exe;
    auto report = a.info.metadata.find("memory_report");
    if (args.memory) {
        fmt::print("{}", report != a.info.metadata.end() ? report->second : "no memory report recorded\n");
        return 0;
    }
    fmt::print("// compiled artifact {}\n", args.model);
    for (const auto& [key, value] : a.info.metadata)
        if (key != "memory_report") fmt::print("{}: {}\n", key, value);  // multi-line: --memory
    std::string features;
    for (const std::string& f : a.info.cpu_features) features += (features.empty() ? "" : " ") + f;
    fmt::print("cpu_features: {}\n", features.empty() ? "(none recorded)" : features);
    size_t constant_bytes = 0;
    for (const runtime::BufferDesc& b : exe.buffers)
        if (b.role == runtime::BufferRole::kConstant) constant_bytes += b.nbytes();
    for (const std::vector<int>* ids : {&exe.inputs, &exe.outputs})
        for (int id : *ids)
            fmt::print("{} {}: {} {}\n", role_name(exe.buffers[id].role), exe.buffers[id].name,
                       dtype_name(exe.buffers[id].dtype), shape_text(exe, exe.buffers[id]));
    fmt::print("constants: {} bytes; arena: {} bytes ({} memory plan)\n", constant_bytes, exe.arena_bytes,
               exe.planned_for_concurrency ? "concurrent" : "sequential");
    for (size_t i = 0; i < exe.kernels.size(); ++i) {
        const runtime::KernelDesc& k = exe.kernels[i];
        std::string what = k.is_extern() ? "[" + k.extern_name + "]" : k.is_async ? "[runtime " + k.symbol + "]" : k.symbol;
        fmt::print("kernel {}: {} {}\n", i, k.description, what);
    }
    fmt::print("{} kernels, {} steps\n", exe.kernels.size(), exe.steps.size());
    if (!args.print_after.empty() || args.print_after_all)
        fmt::print("// note: an artifact holds no IR; inspect the ONNX model for the passes\n");
    return 0;
}

/// The memory plan of one training step (forward, loss, backward, optimizer update).
int inspect_training_step(const InspectArgs& args) {
    KILN_CHECK(args.memory, kInvalidArgument) << "--train goes with --memory (it prints the training step's memory plan)";
    TrainingOptions opts;
    opts.session.dims = parse_dims(args.dims);
    if (args.batch_size > 0) bind_batch_dim(Session::load(args.model)->inputs(), args.batch_size, opts.session.dims);
    opts.session.kernels = args.kernel_source;
    opts.loss.kind = args.loss;
    opts.optimizer.kind = args.optimizer;
    opts.recompute = args.recompute;
    if (!args.memory_limit.empty()) opts.recompute_memory_limit = parse_bytes(args.memory_limit, "--memory-limit");
    std::unique_ptr<TrainingSession> session = TrainingSession::create(args.model, opts);
    std::string text = session->memory_report();
    fmt::print("{}", text);
    if (!text.empty() && text.back() != '\n') fmt::print("\n");
    fmt::print("training step peak (planned intermediates): {} bytes\n", session->planned_peak_bytes());
    return 0;
}

int inspect_model(const InspectArgs& args) {
    KILN_CHECK(std::filesystem::is_regular_file(args.model), kIOError)
        << "cannot open model '" << args.model << "': no such file";
    if (runtime::is_artifact_file(args.model)) return inspect_artifact(args);
    if (args.train) return inspect_training_step(args);
    if (args.partition > 0) {
        distributed::PartitionOptions popts;
        popts.num_ranks = args.partition;
        popts.stages = distributed::parse_stage_map(args.stages);
        ir::Graph g = frontend::import_onnx_file(args.model);
        fmt::print("{}", distributed::partition_report(distributed::partition_model(g, parse_dims(args.dims), popts, args.opt_level)));
        return 0;
    }
    if (!args.place.empty()) {
        compiler::CudaCompileOptions copts;
        copts.dims = parse_dims(args.dims);
        copts.opt_level = args.opt_level;
        apply_device_placement(args.placement, copts);
        ir::Graph g = frontend::import_onnx_file(args.model);
        fmt::print("{}", compiler::cuda_placement_report(g, copts));
        return 0;
    }
    SessionOptions opts;
    opts.dims = parse_dims(args.dims);
    opts.executor = args.executor == "sequential" ? ExecutorKind::kSequential
                    : args.executor == "dataflow" ? ExecutorKind::kDataflow
                                                  : ExecutorKind::kAuto;
    opts.opt_level = args.opt_level;
    opts.kernels = args.kernel_source;
    opts.tuning_log = args.tuning_log;
    opts.print_after = args.print_after;
    opts.print_after_all = args.print_after_all;
    std::unique_ptr<Session> session = Session::load(args.model, opts);
    std::string text = args.memory ? session->memory_report() : args.kernels ? session->kernel_list() : session->inspect();
    fmt::print("{}", text);
    if (!text.empty() && text.back() != '\n') fmt::print("\n");
    return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, CommandAction& action) {
    auto args = std::make_shared<InspectArgs>();
    CLI::App* sub = app.add_subcommand(
        "inspect", "Print a model's IR and the loop IR and C source of every kernel");
    sub->add_option("model", args->model, "ONNX model file or compiled .kiln artifact")->required();
    sub->add_option("--dim", args->dims, "Value of a symbolic dimension (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    sub->add_flag("--memory", args->memory,
                  "Print the memory plan instead: arena, naive sum, lower bound (bytes), the largest tensors");
    add_opt_level_option(sub, args->opt_level);
    add_kernels_option(sub, args->kernel_source, "--kernel-source");  // --kernels prints the kernels
    add_tuning_log_option(sub, args->tuning_log);
    sub->add_option("--print-after", args->print_after,
                    "Also print the IR after this pass (repeatable; names: see docs/passes.md)")
        ->type_name("PASS")
        ->allow_extra_args(false);
    sub->add_flag("--print-after-all", args->print_after_all, "Also print the IR after every pass");
    sub->add_flag("--kernels", args->kernels,
                  "Print only the kernels a run launches, one line each (fused ops), and their count");
    sub->add_option("--executor", args->executor,
                    "Plan for this executor: sequential, dataflow (concurrency-safe plan), or auto")
        ->capture_default_str()
        ->check(CLI::IsMember({"sequential", "dataflow", "auto"}));
    sub->add_flag("--train", args->train,
                  "With --memory: the memory plan of a training step (forward, loss, backward, optimizer)");
    sub->add_option("--batch-size", args->batch_size, "--train: bind the model's batch dimension to N")
        ->type_name("N")
        ->check(CLI::PositiveNumber);
    sub->add_option("--loss", args->loss, "--train: the loss (as kiln train --loss)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cross_entropy", "nll", "mse", "output"}));
    sub->add_option("--optimizer", args->optimizer, "--train: the optimizer (its state is in the plan)")
        ->capture_default_str()
        ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
    sub->add_option("--recompute", args->recompute, "--train: activation recomputation: none, sqrt, auto")
        ->capture_default_str()
        ->check(CLI::IsMember({"none", "sqrt", "auto"}));
    sub->add_option("--memory-limit", args->memory_limit, "--train: budget of --recompute auto (bytes; K, M, G)")
        ->type_name("BYTES");
    sub->add_option("--partition", args->partition,
                    "Print the model split over N ranks: each rank's graph with its Send/Recv nodes, the transfers "
                    "(key, type, bytes) and each stage's estimated cost")
        ->type_name("N")
        ->check(CLI::PositiveNumber);
    sub->add_option("--stage", args->stages, "With --partition: place nodes on ranks (else a cost-balanced split)")
        ->type_name("NODE=RANK,...")
        ->allow_extra_args(false);
    sub->add_option("--place", args->place,
                    "Print the model as the GPU compile places it: every node's device (kiln.device), the copies at "
                    "device boundaries, and the nodes placed by a pin or rule")
        ->type_name("DEVICE")
        ->check(CLI::IsMember({"cuda"}));
    add_device_placement_options(sub, args->placement);
    sub->callback([args, &action] { action = [args] { return inspect_model(*args); }; });
}

}  // namespace kiln::cli
