#include "compiler/compile_artifact.h"

#include <chrono>
#include <filesystem>
#include <set>

#include "compiler/compile.h"
#include "compiler/compile_program_artifact.h"
#include "compiler/dim_ranges.h"
#include "compiler/graph_interpreter.h"
#include "compiler/model_compile_options.h"
#include "compiler/symbolic_compile.h"
#include "frontend/onnx/importer.h"
#include "op/registry.h"
#include "runtime/artifact.h"
#include "support/error.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::compiler {
namespace fs = std::filesystem;
namespace {

constexpr const char* kWhy = "artifacts hold a compiled executable; ";

void check_paths(const std::string& onnx_path, const std::string& out_path) {
    KILN_CHECK(fs::is_regular_file(onnx_path), kIOError) << "cannot open model '" << onnx_path << "': no such file";
    KILN_CHECK(!out_path.empty(), kInvalidArgument) << "no output path given for the artifact (-o FILE.kiln)";
    fs::path parent = fs::path(out_path).parent_path();
    if (parent.empty()) parent = ".";
    KILN_CHECK(fs::is_directory(parent), kIOError)
        << "cannot write artifact '" << out_path << "': directory '" << parent.string() << "' does not exist";
    KILN_CHECK(!fs::is_directory(out_path), kIOError) << "cannot write artifact '" << out_path << "': it is a directory";
    std::error_code ec;
    KILN_CHECK(!fs::equivalent(onnx_path, out_path, ec), kInvalidArgument)
        << "the artifact path '" << out_path << "' is the model itself: give another -o";
}

/// The reasons an artifact cannot hold `g` (see the file comment), as kiln::Errors.
void check_compilable(const ir::Graph& g, const std::map<std::string, int64_t>& dims, const DimRanges& ranges) {
    for (const ir::Node* n : g.nodes())
        KILN_CHECK(op::OpRegistry::global().find(n->op()), kUnsupported)
            << "unsupported op '" << n->op() << "' (" << n->describe() << ")";
    std::set<std::string> value_fed = value_fed_inputs(g);
    std::string why = interpreter_reason(g, std::vector<std::string>(value_fed.begin(), value_fed.end()));
    KILN_CHECK(why.empty(), kUnsupported) << kWhy << "model graph '" << g.name << "' needs the graph interpreter ("
                                          << why << "); run the ONNX model with kiln run or kiln::Session instead";
    KILN_CHECK(value_fed.empty(), kUnsupported)
        << kWhy << "graph input '" << *value_fed.begin()
        << "' is read as a value that shapes the graph (a Reshape target, a Range limit, ...); make it an "
           "initializer of the model, or run the ONNX model with kiln run";
    std::set<std::string> symbols;
    for (const ir::Value* in : g.inputs())
        for (const ir::Dim& d : in->type().shape)
            if (!d.is_static()) symbols.insert(d.symbol);
    for (const auto& [name, value] : dims) {
        std::string known;
        for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
        KILN_CHECK(symbols.count(name), kInvalidArgument)
            << "--dim " << name << "=" << value << ": no model input has a dimension named '" << name
            << "' (symbolic dimensions: " << (known.empty() ? "none" : known) << ")";
    }
    check_dim_ranges(ranges, symbols, dims);
}

/// The first input dim that `dims` leaves unbound, as (input name, dim name); empty when none.
std::pair<std::string, std::string> first_unbound(const ir::Graph& g, const std::map<std::string, int64_t>& dims) {
    for (const ir::Value* in : g.inputs())
        for (const ir::Dim& d : in->type().shape)
            if (!d.is_static() && !dims.count(d.symbol)) return {in->name(), d.symbol};
    return {};
}

/// A dim left unbound makes a symbolic compile (one artifact for every value,
/// docs/dynamic_shapes.md), for a model inside the symbolic subset; otherwise the dim needs a
/// value. `why` is the reason the model is outside the subset ("" to check it here).
[[noreturn]] void refuse_unbound(const std::pair<std::string, std::string>& unbound, const std::string& why) {
    KILN_THROW(kInvalidArgument) << "input '" << unbound.first << "' has symbolic dimension '" << unbound.second
                                 << "', and the model cannot be compiled for every value of it (" << why
                                 << "): give it a value (kiln compile --dim " << unbound.second << "=VALUE)";
}

CompiledModel compile_symbolic(ir::Graph& g, const CompileOptions& copts,
                               const std::pair<std::string, std::string>& unbound) {
    const std::string why = symbolic_prefilter(g);
    if (!why.empty()) refuse_unbound(unbound, why);
    try {
        return compile(g, copts);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::kUnsupported) throw;
        refuse_unbound(unbound, e.message());
    }
}

std::string dims_str(const std::map<std::string, int64_t>& dims) {
    std::string s;
    for (const auto& [k, v] : dims) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
    return s;
}

}  // namespace

ArtifactReport compile_artifact(const std::string& onnx_path, const std::string& out_path, const ArtifactOptions& opts) {
    const auto t0 = std::chrono::steady_clock::now();
    check_paths(onnx_path, out_path);
    const SessionOptions& so = opts.session;
    frontend::ModelFacts facts;
    ir::Graph g = frontend::import_onnx_file(onnx_path, &facts);
    if (wants_program_artifact(g)) {  // control flow: the VM program and its segments
        KILN_CHECK(so.dim_ranges.empty(), kUnsupported)
            << "declared dim ranges are not kept in an artifact of a model with control flow; run the ONNX model "
               "with them (kiln run --dim-range) or compile without";
        ArtifactReport r;
        compile_program_artifact(g, facts, onnx_path, out_path, opts, r);
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }
    check_compilable(g, so.dims, so.dim_ranges);

    const int threads = resolve_intra_op_threads(so.threads);
    CompileOptions copts = compile_options_for(so, threads);
    copts.one_library = true;
    copts.compile_jobs = opts.compile_jobs;
    copts.plan_for_concurrency = so.executor == ExecutorKind::kDataflow ||
                                 (so.executor == ExecutorKind::kAuto && so.inter_op_threads > 1);
    const auto unbound = first_unbound(g, so.dims);
    copts.symbolic = !unbound.first.empty();
    if (copts.symbolic && !so.symbolic_shapes) refuse_unbound(unbound, "SessionOptions::symbolic_shapes is off");
    CompiledModel m = copts.symbolic ? compile_symbolic(g, copts, unbound) : compile(g, copts);
    add_declared_dim_limits(*m.executable, so.dim_ranges);  // checked by every run of the artifact
    const runtime::Executable& exe = *m.executable;

    ArtifactReport r;
    r.path = out_path;
    r.model_bytes = fs::file_size(onnx_path);
    for (const runtime::KernelDesc& k : exe.kernels) {
        r.kernels += !k.is_async && !k.is_extern();
        r.extern_kernels += k.is_extern();
    }
    r.steps = static_cast<int>(exe.steps.size());
    r.objects_compiled = m.stats.compiled;
    r.library_bytes = fs::file_size(m.kernel_library);

    runtime::ArtifactInfo info;
    auto& md = info.metadata;
    md["producer"] = "kiln " KILN_VERSION;
    md["kiln_version"] = KILN_VERSION;
    md["source_model"] = fs::path(onnx_path).filename().string();
    md["source_model_bytes"] = std::to_string(r.model_bytes);
    md["opt_level"] = std::to_string(so.opt_level);
    md["dims"] = dims_str(so.dims);
    std::string symbolic;
    for (const std::string& d : exe.dims) symbolic += (symbolic.empty() ? "" : ",") + d;
    md["symbolic_dims"] = symbolic;
    md["kernels"] = so.kernels;
    md["threads"] = std::to_string(threads);
    const std::string log = resolve_tuning_log(so.tuning_log);
    md["tuning_log"] = log.empty() ? "none" : log;
    md["tuned_workloads"] = std::to_string(copts.tuned.size());
    md["memory_plan"] = exe.planned_for_concurrency ? "concurrent" : "sequential";
    md["generated_kernels"] = std::to_string(r.kernels);
    md["extern_kernels"] = std::to_string(r.extern_kernels);
    md["steps"] = std::to_string(r.steps);
    md["arena_bytes"] = std::to_string(exe.arena_bytes);
    md["memory_report"] = m.memory.report;  // Session::memory_report() of the artifact shows it
    for (const auto& [key, value] : facts) md["model." + key] = value;
    runtime::save_artifact(out_path, exe, r.kernels > 0 ? m.kernel_library : "", info);

    r.bytes = fs::file_size(out_path);
    r.metadata = md;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace kiln::compiler
