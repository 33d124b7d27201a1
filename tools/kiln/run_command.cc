// `kiln run`: load a model, bind inputs (from .npy/.npz files or seeded random data of the declared
// type), run once to warm up (which includes any compile deferred to the first run), then time N
// runs and report the median. Prints the compile statistics, each output's type, shape and leading
// values, and optionally writes every output to DIR/<name>.npy and the timings to a JSON file
// (--timings-json: load, first run and each timed run in ms, for bench/peers.py).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "distributed/communicator.h"
#include "distributed/master_dispatch.h"
#include "distributed/partitioned_run.h"
#include "distributed/rank_graph_shipping.h"
#include "distributed/rendezvous.h"
#include "frontend/onnx/importer.h"
#include "kiln/kiln.h"
#include "name_value_args.h"
#include "random_inputs.h"
#include "run_collectives.h"
#include "run_cuda.h"
#include "runtime/artifact.h"
#include "support/npy.h"
#include "tensor_format.h"

namespace kiln::cli {
namespace {

struct RunArgs {
    std::string model;
    std::vector<std::string> inputs;  // NAME=FILE.npy
    std::string inputs_npz;
    std::vector<std::string> dims;  // NAME=VALUE
    std::vector<std::string> specialize;  // NAME=SIZE,SIZE,...
    std::vector<std::string> dim_ranges;  // NAME=MIN..MAX
    std::string output_dir;
    int repeat = 10;
    int threads = 0;
    uint64_t seed = 0;
    std::string executor = "auto";  // sequential | dataflow | auto
    int inter_op_threads = 0;
    bool global_pools = false;
    bool symbolic_shapes = false;
    std::string profile_path;
    bool profile_summary = false;
    size_t memory_limit = 0;     // bytes, 0 = unlimited
    bool memory_report = false;  // print the memory plan and allocator statistics
    int opt_level = 3;
    std::string kernels = "auto";
    std::string tuning_log;    // "" = the default log when it exists, "none" = untuned
    std::string timings_json;  // write load / first-run / per-run milliseconds here
    std::vector<std::string> compile_options_given;  // of -O, --kernels, --tuning-log
    std::string control_flow = "auto";  // auto (the session's choice) | frames (kiln/frames.h)
    int parallel_iterations = 10;       // with --control-flow frames
    std::string device = "cpu";         // cpu | cuda (run_cuda.h)
    bool compare_cpu = false;           // with --device cuda
    std::string gpu_math = "fp32";      // with --device cuda: fp32 | tf32 | fp16
    DevicePlacementArgs placement;      // with --device cuda: --pin, --pin-op, --place-by-cost
    int partition = 0;                  // > 0: run split over this many ranks in one process
    std::vector<std::string> stages;    // with --partition: NODE=RANK,... (else cost-balanced)
    int microbatches = 1;               // with --partition: cut each run's inputs into this many
    std::string dispatch = "master";    // with --partition under mpirun: master or replicated
};

ExecutorKind parse_executor(const std::string& s) {
    if (s == "sequential") return ExecutorKind::kSequential;
    if (s == "dataflow") return ExecutorKind::kDataflow;
    return ExecutorKind::kAuto;
}

constexpr int64_t kValuesShown = 10;

std::string input_names(const std::vector<TensorInfo>& infos) {
    std::string out;
    for (const TensorInfo& info : infos) out += (out.empty() ? "" : ", ") + info.name;
    return out.empty() ? "(none)" : out;
}

/// Tensors given on the command line, by input name; checks every name is a model input.
std::map<std::string, Tensor> read_given_inputs(const RunArgs& args, const std::vector<TensorInfo>& inputs,
                                                std::map<std::string, std::string>& origin) {
    std::map<std::string, Tensor> given;
    if (!args.inputs_npz.empty()) {
        for (auto& [name, t] : read_npz(args.inputs_npz)) {
            given[name] = t;
            origin[name] = args.inputs_npz;
        }
    }
    std::map<std::string, bool> seen;
    for (const std::string& arg : args.inputs) {
        auto [name, path] = split_name_value(arg, "--input");
        KILN_CHECK(!seen[name], kInvalidArgument) << "--input " << name << " given twice";
        seen[name] = true;
        given[name] = read_npy(path);  // overrides an array of the same name from --inputs
        origin[name] = path;
    }
    for (const auto& [name, t] : given) {
        bool known = std::any_of(inputs.begin(), inputs.end(), [&](const TensorInfo& info) { return info.name == name; });
        KILN_CHECK(known, kInvalidArgument)
            << "'" << name << "' (from " << origin[name]
            << ") is not an input of the model; its inputs are: " << input_names(inputs);
    }
    return given;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string dims_str(const std::map<std::string, int64_t>& dims) {
    std::string s;
    for (const auto& [name, v] : dims) s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, v);
    return s;
}

/// --specialize with random inputs: the first run and the median of `repeat` runs at each
/// specialized shape after the first (which the main timing covers): first runs are warm.
void time_other_specializations(Session& session, const std::vector<std::map<std::string, int64_t>>& combos,
                                const std::map<std::string, int64_t>& dims, uint64_t seed, int repeat) {
    using Clock = std::chrono::steady_clock;
    for (size_t c = 1; c < combos.size(); ++c) {
        std::map<std::string, int64_t> bound = dims;
        bound.insert(combos[c].begin(), combos[c].end());
        RandomInputs random(seed);
        std::map<std::string, Tensor> feeds;
        for (const TensorInfo& info : session.inputs())
            feeds[info.name] = random.make(info.dtype, resolve_input_shape(info, bound));
        std::vector<double> ms;
        for (int r = 0; r <= repeat; ++r) {
            auto t0 = Clock::now();
            (void)session.run(feeds);
            ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        const double first = ms.front();
        ms.erase(ms.begin());
        fmt::print("{}: first run {:.2f} ms, median {:.2f} ms ({} runs)\n", dims_str(combos[c]), first, median(ms),
                   ms.size());
    }
}

void write_outputs(const std::string& dir, const std::vector<TensorInfo>& infos,
                   const std::vector<Tensor>& outputs) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    KILN_CHECK(!ec, kIOError) << "cannot create output directory '" << dir << "': " << ec.message();
    std::map<std::string, std::string> used;  // file name -> output name, to catch collisions
    for (size_t i = 0; i < outputs.size(); ++i) {
        std::string name = i < infos.size() ? infos[i].name : fmt::format("output_{}", i);
        std::string file = sanitize_file_name(name);
        if (used.count(file)) file = fmt::format("{}_{}", file, i);
        used[file] = name;
        std::string path = (std::filesystem::path(dir) / (file + ".npy")).string();
        write_npy(path, outputs[i]);
        fmt::print("wrote {}\n", path);
    }
}

/// {"load_ms": L, "first_run_ms": F, "compile_s": C, "runs_ms": [...]}: one line of JSON.
void write_timings(const std::string& path, double load_ms, double first_run_ms, double compile_s,
                   const std::vector<double>& ms) {
    std::ofstream f(path);
    KILN_CHECK(f.good(), kIOError) << "cannot write timings to '" << path << "'";
    f << fmt::format("{{\"load_ms\": {:.4f}, \"first_run_ms\": {:.4f}, \"compile_s\": {:.4f}, ",
                     load_ms, first_run_ms, compile_s)
      << "\"runs_ms\": [";
    for (size_t i = 0; i < ms.size(); ++i) f << (i ? ", " : "") << fmt::format("{:.4f}", ms[i]);
    f << "]}\n";
    KILN_CHECK(f.good(), kIOError) << "cannot write timings to '" << path << "'";
}

/// --control-flow frames: If and Loop as TF1 frames (kiln/frames.h) on given or random inputs.
int run_frames_model(const RunArgs& args) {
    using Clock = std::chrono::steady_clock;
    const auto ms_since = [](Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
    const auto load_start = Clock::now();
    FramesOptions opts;
    opts.threads = args.threads > 0 ? args.threads : 1;
    opts.inter_op_threads = args.inter_op_threads > 0 ? args.inter_op_threads : 2;
    opts.parallel_iterations = args.parallel_iterations;
    opts.dims = parse_dims(args.dims);
    opts.opt_level = args.opt_level;
    std::unique_ptr<FramesModel> model = FramesModel::load(args.model, opts);
    const double load_ms = ms_since(load_start);
    std::map<std::string, std::string> origin;
    std::map<std::string, Tensor> feeds = read_given_inputs(args, model->inputs(), origin);
    RandomInputs random(args.seed);
    for (const TensorInfo& info : model->inputs())
        if (!feeds.count(info.name)) feeds[info.name] = random.make(info.dtype, resolve_input_shape(info, opts.dims));
    const auto first_start = Clock::now();
    std::vector<Tensor> outputs = model->run(feeds);
    const double first_run_ms = ms_since(first_start);
    FramesStats st = model->stats();
    fmt::print("compiled {} kernels ({} compiled, {} cached) in {:.2f} s\n", st.kernels, st.compiled,
               st.kernels - st.compiled, st.compile_seconds);
    std::vector<double> ms;
    for (int r = 0; r < args.repeat; ++r) {
        auto t0 = Clock::now();
        outputs = model->run(feeds);
        ms.push_back(ms_since(t0));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        fmt::print("{}: {} {}\n", model->outputs()[i].name, dtype_name(outputs[i].dtype()), shape_str(outputs[i].shape()));
        fmt::print("  values: {}\n", format_leading_values(outputs[i], kValuesShown));
    }
    fmt::print("median {:.2f} ms ({} runs)\n", median(ms), ms.size());
    st = model->stats();
    fmt::print("executor frames (intra-op threads {}, inter-op threads {}, parallel iterations {}): {} iterations, "
               "at most {} live at once, {} kernels run ({} at once at most), {} dead\n",
               opts.threads, opts.inter_op_threads, opts.parallel_iterations, st.iterations, st.peak_live_iterations,
               st.kernels_run, st.peak_running_kernels, st.kernels_dead);
    if (!args.output_dir.empty()) write_outputs(args.output_dir, model->outputs(), outputs);
    if (!args.timings_json.empty()) write_timings(args.timings_json, load_ms, first_run_ms, st.compile_seconds, ms);
    return 0;
}

/// Whether this process was started by mpirun (Open MPI's or a PMI launcher's variables).
bool in_mpi_job() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

/// The model's inputs: the given ones, the rest random (the same on every rank: the same seed).
std::map<std::string, Tensor> partition_feeds(const RunArgs& args, const distributed::PartitionedModel& model,
                                              const std::map<std::string, int64_t>& dims) {
    std::map<std::string, std::string> origin;
    std::map<std::string, Tensor> feeds = read_given_inputs(args, model.inputs(), origin);
    RandomInputs random(args.seed);
    for (const TensorInfo& info : model.inputs())
        if (!feeds.count(info.name)) feeds[info.name] = random.make(info.dtype, resolve_input_shape(info, dims));
    return feeds;
}

/// --microbatches M: the ranks compile for a microbatch, 1/M of the inputs' leading dim, which
/// must be one symbolic dim of every input, given with --dim (the whole batch).
std::map<std::string, int64_t> microbatch_dims(const ir::Graph& g, std::map<std::string, int64_t> dims, int parts) {
    if (parts == 1) return dims;
    std::string batch;
    for (const ir::Value* in : g.inputs()) {
        const auto& shape = in->type().shape;
        KILN_CHECK(!shape.empty() && !shape[0].is_static() && (batch.empty() || shape[0].symbol == batch),
                   kInvalidArgument)
            << "--microbatches cuts every input along its leading (batch) axis, which must be one symbolic dim; "
            << "input '" << in->name() << "' has type " << in->type().str();
        batch = shape[0].symbol;
    }
    auto it = dims.find(batch);
    KILN_CHECK(it != dims.end(), kInvalidArgument)
        << "--microbatches " << parts << ": give the whole batch with --dim " << batch << "=VALUE";
    KILN_CHECK(it->second % parts == 0, kInvalidArgument)
        << "--microbatches " << parts << " does not divide " << batch << "=" << it->second;
    it->second /= parts;
    return dims;
}

SessionOptions partition_session_options(const RunArgs& args) {
    SessionOptions opts;
    opts.threads = args.threads;
    opts.dims = parse_dims(args.dims);
    opts.executor = parse_executor(args.executor);
    opts.inter_op_threads = args.inter_op_threads;
    opts.opt_level = args.opt_level;
    opts.kernels = args.kernels;
    opts.tuning_log = args.tuning_log;
    return opts;
}

/// The body of run_partitioned_model: load, run --repeat times (each step through MPI when
/// `comm` is set), print on rank 0.
int run_partition_ranks(const RunArgs& args, distributed::Communicator* comm) {
    if (comm && args.dispatch == "master" && comm->rank() > 0) {
        // A worker: its graph, already bound to the master's dims, and its orders come from rank 0.
        SessionOptions opts = partition_session_options(args);
        opts.dims.clear();
        distributed::Rendezvous rv(*comm);
        distributed::run_worker(rv, comm->rank(), comm->size(), opts);
        return 0;
    }
    using Clock = std::chrono::steady_clock;
    const auto ms_since = [](Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
    const auto load_start = Clock::now();
    SessionOptions opts = partition_session_options(args);
    const std::map<std::string, int64_t> whole_dims = opts.dims;
    ir::Graph g = frontend::import_onnx_file(args.model);
    opts.dims = microbatch_dims(g, opts.dims, args.microbatches);
    distributed::PartitionOptions popts;
    popts.num_ranks = args.partition;
    popts.stages = distributed::parse_stage_map(args.stages);
    const int rank = comm ? comm->rank() : -1;
    std::unique_ptr<distributed::Rendezvous> rv;
    if (comm) rv = std::make_unique<distributed::Rendezvous>(*comm);
    const bool master = comm && args.dispatch == "master";
    distributed::PartitionedModel::ShipFn ship;
    if (master) ship = [&](distributed::RankGraph rg) { distributed::ship_rank_graph(*rv, std::move(rg)); };
    distributed::PartitionedModel model(std::move(g), popts, opts, rank, ship);
    std::unique_ptr<distributed::MasterDispatch> dispatch;
    if (master) dispatch = std::make_unique<distributed::MasterDispatch>(model, *rv);
    const double load_ms = ms_since(load_start);
    const bool printer = rank <= 0;
    int64_t bytes = 0;
    for (const distributed::Transfer& t : model.transfers()) bytes += t.bytes;
    if (printer)
        fmt::print("partitioned over {} ranks ({}{}): {} transfers, {} bytes per step; {} kernels{}{}\n",
                   model.num_ranks(), popts.stages.empty() ? "cost-balanced or kiln.rank" : "--stage",
                   comm ? ", one MPI process each" : "", model.transfers().size(), bytes, model.kernels(),
                   comm ? " on rank 0" : "",
                   args.microbatches > 1 ? fmt::format("; {} microbatches per run", args.microbatches) : "");
    const std::map<std::string, Tensor> feeds = partition_feeds(args, model, whole_dims);
    const int parts = args.microbatches;
    // A master keeps the next run ordered while it runs one, so no worker waits for its order.
    int unordered = 1 + args.repeat;
    auto step = [&] {
        if (!dispatch) return comm ? model.run_mpi(feeds, *rv, rank, parts) : model.run(feeds, parts);
        for (; unordered > 0 && dispatch->in_flight() < 2; --unordered) dispatch->enqueue(feeds, parts);
        return dispatch->collect();
    };
    const auto first_start = Clock::now();
    std::vector<Tensor> outputs = step();
    const double first_run_ms = ms_since(first_start);
    std::vector<double> ms;
    for (int r = 0; r < args.repeat; ++r) {
        auto t0 = Clock::now();
        outputs = step();
        ms.push_back(ms_since(t0));
    }
    if (dispatch) dispatch->stop();
    if (!printer) return 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
        fmt::print("{}: {} {}\n", model.outputs()[i].name, dtype_name(outputs[i].dtype()), shape_str(outputs[i].shape()));
        fmt::print("  values: {}\n", format_leading_values(outputs[i], kValuesShown));
    }
    fmt::print("median {:.2f} ms ({} runs)\n", median(ms), ms.size());
    if (!args.output_dir.empty()) write_outputs(args.output_dir, model.outputs(), outputs);
    if (!args.timings_json.empty()) write_timings(args.timings_json, load_ms, first_run_ms, 0, ms);
    return 0;
}

/// --partition N: the model split over N ranks (distributed/partitioned_run.h,
/// docs/distributed.md): under mpirun -np N each process runs its own rank and the transfers go
/// over MPI (rank 0 prints and writes the outputs); otherwise the ranks run one after another in
/// this process with the transfers through an in-memory rendezvous.
int run_partitioned_model(const RunArgs& args) {
    distributed::Communicator* comm = in_mpi_job() ? &distributed::Communicator::get() : nullptr;
    KILN_CHECK(!comm || comm->size() == args.partition, kInvalidArgument)
        << "--partition " << args.partition << " under mpirun needs " << args.partition << " processes, the job has "
        << comm->size() << " (mpirun -np " << args.partition << ")";
    try {
        // A master's worker reads neither the model nor the inputs: both come from rank 0.
        if (!comm || args.dispatch != "master" || comm->rank() == 0) {
            KILN_CHECK(std::filesystem::is_regular_file(args.model), kIOError)
                << "cannot open model '" << args.model << "': no such file";
            KILN_CHECK(!runtime::is_artifact_file(args.model), kInvalidArgument)
                << "--partition takes an ONNX model, not a compiled artifact";
            KILN_CHECK(!mentions_collective_domain(args.model), kInvalidArgument)
                << args.model << " holds collective ops (ai.kiln.distributed): every rank runs it whole on the CPU, "
                << "without --partition or --device cuda (docs/distributed.md, \"Collectives as graph ops\")";
        }
        const int rc = run_partition_ranks(args, comm);
        if (comm) comm->finalize();
        return rc;
    } catch (const std::exception& e) {
        // A rank that fails alone would leave its peers waiting for its transfers.
        if (comm && comm->size() > 1) comm->abort(1, fmt::format("rank {}: {}", comm->rank(), e.what()));
        throw;
    }
}

int run_model(const RunArgs& args) {
    if (args.partition > 0 && args.control_flow != "frames") return run_partitioned_model(args);
    KILN_CHECK(std::filesystem::is_regular_file(args.model), kIOError)
        << "cannot open model '" << args.model << "': no such file";
    if (args.control_flow == "frames") return run_frames_model(args);
    KILN_CHECK(args.microbatches == 1 || args.partition > 0, kInvalidArgument)
        << "--microbatches goes with --partition N (a pipeline over N ranks)";
    const bool collectives = !runtime::is_artifact_file(args.model) && mentions_collective_domain(args.model);
    KILN_CHECK(!collectives || (args.partition == 0 && args.device == "cpu"), kInvalidArgument)
        << args.model << " holds collective ops (ai.kiln.distributed): every rank runs it whole on the CPU, "
        << "without --partition or --device cuda (docs/distributed.md, \"Collectives as graph ops\")";
    if (collectives)
        return run_collective_model({args.model, args.inputs_npz, args.inputs, args.output_dir,
                                     partition_session_options(args), args.repeat, args.seed});
    if (args.device == "cuda")
        return run_model_cuda({args.model, args.inputs, parse_dims(args.dims), args.repeat, args.seed, args.memory_limit,
                               args.opt_level, args.compare_cpu, args.output_dir, args.kernels != "generated",
                               args.inputs_npz, args.gpu_math, args.profile_summary, args.placement});
    const bool artifact = runtime::is_artifact_file(args.model);
    if (!args.compile_options_given.empty() && artifact) {
        std::string given;
        for (const std::string& o : args.compile_options_given) given += (given.empty() ? "" : ", ") + o;
        fmt::print(stderr, "note: {} is a compiled artifact: {} took effect when it was compiled (kiln compile); ignored\n",
                   args.model, given);
    }
    using Clock = std::chrono::steady_clock;
    const auto load_start = Clock::now();
    SessionOptions opts;
    opts.threads = args.threads;
    opts.dims = parse_dims(args.dims);
    opts.specialize = parse_specialize(args.specialize);
    opts.dim_ranges = parse_dim_ranges(args.dim_ranges);
    opts.executor = parse_executor(args.executor);
    opts.inter_op_threads = args.inter_op_threads;
    opts.use_global_thread_pools = args.global_pools;
    opts.profile_path = args.profile_path;
    opts.profile = args.profile_summary;
    opts.memory_limit = args.memory_limit;
    opts.opt_level = args.opt_level;
    opts.kernels = args.kernels;
    opts.tuning_log = args.tuning_log;
    // kiln run times one shape, so it compiles per shape (unlike a session's default);
    // --symbolic-shapes: one compile for every shape; --dim then only sizes the random inputs.
    std::map<std::string, int64_t> input_dims = opts.dims;
    opts.symbolic_shapes = args.symbolic_shapes;
    if (args.symbolic_shapes) opts.dims.clear();
    std::unique_ptr<Session> session = Session::load(args.model, opts);
    const auto elapsed_ms = [](Clock::time_point t0) {
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    const double load_ms = elapsed_ms(load_start);
    const std::vector<std::map<std::string, int64_t>> combos = specialization_combinations(opts.specialize);
    if (!combos.empty()) {
        const SessionStats st = session->stats();
        fmt::print("specialized {} shapes at load ({} compiles, {:.2f} s load)\n", combos.size(), st.compiles,
                   load_ms / 1e3);
    }
    // Random inputs take the first specialized shape where --dim leaves a dim open.
    std::map<std::string, int64_t> random_dims = input_dims;
    if (!combos.empty()) random_dims.insert(combos[0].begin(), combos[0].end());

    std::map<std::string, std::string> origin;
    std::map<std::string, Tensor> feeds = read_given_inputs(args, session->inputs(), origin);
    RandomInputs random(args.seed);
    for (const TensorInfo& info : session->inputs()) {
        if (feeds.count(info.name)) {
            const Tensor& t = feeds[info.name];
            fmt::print("input {}: {} {} (from {})\n", info.name, dtype_name(t.dtype()),
                       shape_str(t.shape()), origin[info.name]);
            continue;
        }
        KILN_CHECK(info.kind == ValueKind::kTensor && info.dtype != DType::kString, kInvalidArgument)
            << "input '" << info.name << "' is a " << (info.kind == ValueKind::kTensor ? "string tensor" : "sequence or optional")
            << ": Kiln makes no random data for it; give it with --input (strings: a numpy unicode array)";
        Shape shape = resolve_input_shape(info, random_dims);
        feeds[info.name] = random.make(info.dtype, shape);
        fmt::print("input {}: {} {} (random, seed {})\n", info.name, dtype_name(info.dtype),
                   shape_str(shape), args.seed);
    }

    const auto first_start = Clock::now();
    std::vector<Tensor> outputs = session->run(feeds);  // warm-up; may compile
    const double first_run_ms = elapsed_ms(first_start);
    SessionStats stats = session->stats();
    if (artifact)
        fmt::print("loaded compiled artifact: {} kernels in {:.2f} ms (nothing compiled)\n", stats.kernels, load_ms);
    else
        fmt::print("compiled {} kernels ({} compiled, {} cached) in {:.2f} s\n", stats.kernels, stats.compiled,
                   stats.kernels - stats.compiled, stats.compile_seconds);
    if (opts.symbolic_shapes && stats.symbolic) fmt::print("symbolic shapes: one compile serves every shape\n");
    if (opts.symbolic_shapes && !stats.symbolic) fmt::print("symbolic shapes: not used ({})\n", stats.symbolic_reason);
    if (stats.quick_kernels > 0) {  // the timed runs measure the -O3 kernels
        session->wait_for_optimized_kernels();
        stats = session->stats();
        fmt::print("tiered compile: {} kernels first built quickly, their -O3 builds running after {:.2f} s\n",
                   stats.quick_kernels, stats.optimize_seconds);
    }

    std::vector<double> ms;
    for (int r = 0; r < args.repeat; ++r) {
        auto t0 = Clock::now();
        outputs = session->run(feeds);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }

    const std::vector<TensorInfo>& infos = session->outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
        std::string name = i < infos.size() ? infos[i].name : fmt::format("output_{}", i);
        const Tensor& t = outputs[i];
        fmt::print("{}: {} {}\n", name, dtype_name(t.dtype()), shape_str(t.shape()));
        fmt::print("  values: {}\n", format_leading_values(t, kValuesShown));
    }
    fmt::print("median {:.2f} ms ({} runs)\n", median(ms), ms.size());
    if (combos.size() > 1 && args.inputs.empty() && args.inputs_npz.empty()) {
        fmt::print("{}: first run {:.2f} ms, median {:.2f} ms ({} runs)\n", dims_str(combos[0]), first_run_ms, median(ms),
                   ms.size());
        time_other_specializations(*session, combos, opts.dims, args.seed, args.repeat);
    }
    stats = session->stats();
    fmt::print("executor {} (intra-op threads {}, inter-op threads {}, parallel width {})\n", stats.executor,
               stats.intra_op_threads, stats.inter_op_threads, stats.parallel_width);
    if (!stats.control_flow.empty()) fmt::print("{}\n", stats.control_flow);
    if (stats.interpreted) fmt::print("graph interpreter: {}\n", stats.interpreter_reason);
    if (args.profile_summary) fmt::print("{}", session->profile_summary(15));
    if (args.memory_report) fmt::print("{}", session->memory_report());
    if (!args.profile_path.empty()) {
        session->write_profile();
        fmt::print("wrote profile {}\n", args.profile_path);
    }
    if (!args.output_dir.empty()) write_outputs(args.output_dir, infos, outputs);
    if (!args.timings_json.empty())
        write_timings(args.timings_json, load_ms, first_run_ms, stats.compile_seconds, ms);
    return 0;
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action) {
    auto args = std::make_shared<RunArgs>();
    CLI::App* sub = app.add_subcommand("run", "Run a model on given or random inputs and time it");
    sub->add_option("model", args->model, "ONNX model file or compiled .kiln artifact (kiln compile)")->required();
    sub->add_option("--input", args->inputs, "Input from a .npy file (repeatable)")
        ->type_name("NAME=FILE.npy")
        ->allow_extra_args(false)
        ->check(name_value_check(false));
    sub->add_option("--inputs", args->inputs_npz, "Inputs from an .npz archive (np.savez), by name; in a model with collective ops "
                    "(docs/distributed.md) {rank} in the path is the MPI rank")
        ->type_name("FILE.npz");
    sub->add_option("--dim", args->dims, "Value of a symbolic dimension (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    sub->add_option("--specialize", args->specialize,
                    "Compile these sizes of a symbolic dimension at load (repeatable; every combination)")
        ->type_name("NAME=SIZE,SIZE,...")
        ->allow_extra_args(false)
        ->check(name_value_check(false));
    sub->add_option("--dim-range", args->dim_ranges,
                    "Declared range of a symbolic dimension, inclusive (repeatable): a run outside it is an error "
                    "naming the input")
        ->type_name("NAME=MIN..MAX")
        ->allow_extra_args(false)
        ->check(name_value_check(false));
    sub->add_flag("--symbolic-shapes", args->symbolic_shapes,
                  "Compile once for every value of the symbolic dims (docs/dynamic_shapes.md); --dim sizes the "
                  "random inputs");
    sub->add_option("--output-dir", args->output_dir, "Write each output to DIR/<name>.npy ({rank}: one directory per MPI rank)")
        ->type_name("DIR");
    sub->add_option("--repeat", args->repeat, "Timed runs after the warm-up run")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    sub->add_option("--threads", args->threads, "Intra-op threads (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--seed", args->seed, "Seed of the random inputs")->capture_default_str();
    add_opt_level_option(sub, args->opt_level);
    add_kernels_option(sub, args->kernels);
    add_tuning_log_option(sub, args->tuning_log);
    sub->add_option("--executor", args->executor,
                    "sequential, dataflow, or auto (dataflow when >= 2 substantial steps can run at once)")
        ->capture_default_str()
        ->check(CLI::IsMember({"sequential", "dataflow", "auto"}));
    sub->add_option("--inter-op-threads", args->inter_op_threads,
                    "Threads running independent kernels (dataflow executor; 0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--control-flow", args->control_flow,
                    "auto (the session's path), or frames: If/Loop as TF1 frames with parallel loop iterations on "
                    "the inter-op threads (docs/control_flow.md)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "frames"}));
    sub->add_option("--parallel-iterations", args->parallel_iterations,
                    "With --control-flow frames: iterations of one loop that may run at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    sub->add_flag("--global-thread-pools", args->global_pools,
                  "Use the process-wide thread pools instead of this session's own");
    sub->add_option("--profile", args->profile_path, "Write a Chrome trace (chrome://tracing, Perfetto) of all runs")
        ->type_name("FILE.json");
    sub->add_flag("--profile-summary", args->profile_summary,
                  "Print the top kernels by total time with their share and GFLOP/s");
    sub->add_option("--memory-limit", args->memory_limit,
                    "Memory budget in bytes for the model's tensors (0 = unlimited); exceeding it is an "
                    "OutOfMemory error")
        ->type_name("BYTES")
        ->capture_default_str();
    sub->add_option("--timings-json", args->timings_json,
                    "Write load, first-run and each timed run's milliseconds to FILE as JSON")
        ->type_name("FILE.json");
    sub->add_option("--device", args->device, "Where to run: cpu, or cuda (GPU 0; docs/gpu.md)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "cuda"}));
    sub->add_flag("--compare-cpu", args->compare_cpu, "With --device cuda: also run on the CPU and print the largest error");
    sub->add_option("--gpu-math", args->gpu_math,
                    "With --device cuda: fp32; tf32 (cuBLAS and cuDNN may use TF32 tensor cores for FP32 "
                    "products, as PyTorch's allow_tf32); or fp16 (the model computes in FP16, its inputs and "
                    "outputs stay FP32)")
        ->capture_default_str()
        ->check(CLI::IsMember({"fp32", "tf32", "fp16"}));
    add_device_placement_options(sub, args->placement);
    sub->add_flag("--memory", args->memory_report, "Print the memory plan and the allocator's statistics");
    sub->add_option("--partition", args->partition,
                    "Split the model over N ranks: in this process, transfers through an in-memory rendezvous; "
                    "under mpirun -np N, one process per rank, transfers over MPI (docs/distributed.md)")
        ->type_name("N")
        ->check(CLI::PositiveNumber);
    sub->add_option("--microbatches", args->microbatches,
                    "With --partition: cut each run's inputs along the batch dim into this many parts, run as a "
                    "pipeline (under mpirun, rank r runs part m+1 while rank r+1 runs part m)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--stage", args->stages, "With --partition: place nodes on ranks (else a cost-balanced split)")
        ->type_name("NODE=RANK,...")
        ->allow_extra_args(false);
    sub->add_option("--dispatch", args->dispatch,
                    "With --partition under mpirun: master (rank 0 partitions the model, ships each worker its "
                    "graph and the inputs it reads, and orders its runs ahead) or replicated (every rank reads "
                    "the model and the inputs and makes the same partition itself)")
        ->capture_default_str()
        ->check(CLI::IsMember({"master", "replicated"}));
    sub->callback([args, sub, &action] {
        for (const char* o : {"-O", "--kernels", "--tuning-log"})  // --dim: checked against the artifact's
            if (sub->count(o) > 0) args->compile_options_given.push_back(o);
        action = [args] { return run_model(*args); };
    });
}

}  // namespace kiln::cli
