#include "compiler/compile_program_artifact.h"

#include <filesystem>

#include "compiler/lower_control_flow.h"
#include "compiler/model_compile_options.h"
#include "runtime/artifact.h"
#include "runtime/caching_allocator.h"
#include "runtime/vm/executable_callee.h"
#include "support/error.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::compiler {
namespace fs = std::filesystem;
namespace {

/// The input shapes the program is lowered at: declared, or from --dim (every dim left without
/// a value is named in one error, with the --dim flags that would give them).
std::vector<Shape> input_shapes(const ir::Graph& g, const std::map<std::string, int64_t>& dims) {
    std::vector<Shape> shapes;
    std::string first_input, missing, flags;
    for (const ir::Value* in : g.inputs()) {
        Shape s;
        for (const ir::Dim& d : in->type().shape) {
            auto it = dims.find(d.symbol);
            const bool known = d.is_static() || it != dims.end();
            s.push_back(d.is_static() ? d.value : known ? it->second : 0);
            if (known || flags.find(" --dim " + d.symbol + "=") != std::string::npos) continue;
            if (first_input.empty()) first_input = in->name();
            missing += (missing.empty() ? "'" : ", '") + d.symbol + "'";
            flags += " --dim " + d.symbol + "=VALUE";
        }
        shapes.push_back(std::move(s));
    }
    KILN_CHECK(missing.empty(), kInvalidArgument)
        << "symbolic dimension " << missing << " (first in input '" << first_input << "') has no value; a model "
        << "with control flow is saved as a VM program lowered at one set of shapes: give each a value (kiln compile"
        << flags << ")";
    return shapes;
}

/// The program's callees as executables; an interpreted one is refused, with the lowering's notes.
void take_executables(const ControlFlowLowering& l, runtime::ProgramImage& image) {
    for (const auto& callee : l.program->callees) {
        auto* exe = dynamic_cast<runtime::vm::ExecutableCallee*>(callee.get());
        if (!exe) {
            std::string notes;  // the first few reasons (a model may list dozens)
            for (size_t k = 0; k < l.notes.size() && k < 3; ++k) notes += "; " + l.notes[k];
            if (l.notes.size() > 3) notes += "; and " + std::to_string(l.notes.size() - 3) + " more (kiln run lists them)";
            KILN_THROW(kUnsupported) << "artifacts hold compiled code only, and part of this model runs in the graph "
                                     << "interpreter (" << callee->describe() << notes
                                     << "); run the ONNX model with kiln run or kiln::Session instead";
        }
        image.executables.push_back(exe->shared_executable());
        image.callee_names.push_back(exe->name());
    }
    image.program = *l.program;
    image.program.callees.clear();
}

TensorInfo info_of(const ir::Value* v, const Shape& shape) {
    TensorInfo t;
    t.name = v->name();
    t.dtype = v->type().dtype;
    t.shape = shape;
    t.symbols.assign(shape.size(), "");
    return t;
}

}  // namespace

bool wants_program_artifact(const ir::Graph& g) {
    bool control = false;
    for (const ir::Node* n : g.nodes()) control |= is_control_flow_op(n->op());
    return control && vm_refusal(g).empty();
}

void compile_program_artifact(const ir::Graph& g, const frontend::ModelFacts& facts, const std::string& onnx_path,
                              const std::string& out_path, const ArtifactOptions& opts, ArtifactReport& r) {
    const SessionOptions& so = opts.session;
    const std::set<std::string> deciding = shape_deciding_inputs(g);
    KILN_CHECK(deciding.empty(), kUnsupported)
        << "graph input '" << *deciding.begin() << "' is read as a value that shapes the graph (a Reshape target, a "
        << "trip count that sizes a scan output, ...); an artifact's program is lowered for fixed shapes: make it an "
        << "initializer of the model, or run the ONNX model with kiln run";
    const std::vector<Shape> shapes = input_shapes(g, so.dims);
    const int threads = resolve_intra_op_threads(so.threads);
    runtime::ThreadPool pool(1);
    std::shared_ptr<runtime::CachingAllocator> alloc = runtime::make_session_allocator(0);
    LowerContext ctx;
    ctx.compile = compile_options_for(so, threads);
    ctx.compile.one_library = true;
    ctx.compile.compile_jobs = opts.compile_jobs;
    ctx.pool = &pool;
    ctx.alloc = alloc.get();
    const ControlFlowLowering l = lower_control_flow(g, shapes, ctx);

    runtime::ProgramImage image;
    take_executables(l, image);
    for (size_t i = 0; i < g.inputs().size(); ++i) image.inputs.push_back(info_of(g.inputs()[i], shapes[i]));
    const runtime::vm::Function& entry = image.program.functions.at(static_cast<size_t>(image.program.entry));
    for (size_t i = 0; i < g.outputs().size(); ++i)
        image.outputs.push_back(info_of(g.outputs()[i], entry.types.at(static_cast<size_t>(entry.results.at(i))).shape));
    for (const auto& exe : image.executables) {
        for (const runtime::KernelDesc& k : exe->kernels) {
            r.kernels += !k.is_async && !k.is_extern();
            r.extern_kernels += k.is_extern();
        }
        r.steps += static_cast<int>(exe->steps.size());
        for (const runtime::KernelDesc& k : exe->kernels)
            if (!k.is_async && !k.is_extern()) {
                r.library_bytes += fs::file_size(k.library);  // the segment's one library
                break;
            }
    }

    runtime::ArtifactInfo info;
    auto& md = info.metadata;
    md["producer"] = "kiln " KILN_VERSION;
    md["kiln_version"] = KILN_VERSION;
    md["source_model"] = fs::path(onnx_path).filename().string();
    md["source_model_bytes"] = std::to_string(fs::file_size(onnx_path));
    md["opt_level"] = std::to_string(so.opt_level);
    std::string dims;
    for (const auto& [k, v] : so.dims) dims += (dims.empty() ? "" : ",") + k + "=" + std::to_string(v);
    md["dims"] = dims;
    md["kernels"] = so.kernels;
    md["threads"] = std::to_string(threads);
    const std::string log = resolve_tuning_log(so.tuning_log);
    md["tuning_log"] = log.empty() ? "none" : log;
    md["tuned_workloads"] = std::to_string(ctx.compile.tuned.size());
    md["memory_plan"] = "sequential";  // the VM calls one segment at a time
    md["executor"] = "vm";
    md["segments"] = std::to_string(image.executables.size());
    md["generated_kernels"] = std::to_string(r.kernels);
    md["extern_kernels"] = std::to_string(r.extern_kernels);
    md["steps"] = std::to_string(r.steps);
    for (const auto& [key, value] : facts) md["model." + key] = value;
    runtime::save_program_artifact(out_path, image, info);
    r.path = out_path;
    r.model_bytes = fs::file_size(onnx_path);
    r.bytes = fs::file_size(out_path);
    r.metadata = md;
}

}  // namespace kiln::compiler
