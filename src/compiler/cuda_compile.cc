#include "compiler/cuda_compile.h"

#include <chrono>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "codegen/nvrtc_compile.h"
#include "compiler/compile.h"
#include "compiler/cuda_conv_match.h"
#include "compiler/cuda_gemm_match.h"
#include "compiler/cuda_row_match.h"
#include "compiler/cuda_lower.h"
#include "compiler/graph_interpreter.h"
#include "compiler/half_precision.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "pass/insert_device_copies.h"
#include "plan/memory_plan.h"
#include "plan/plan_checker.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/extern_kernel.h"
#include "pass/pass_manager.h"
#include "pass/pipeline.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

using runtime::BufferDesc;
using runtime::BufferRole;
using runtime::cuda::CudaProgram;

/// compile()'s pipeline without the CPU's layout passes: the blocked (NCHWc) layouts and the
/// packed matmul weights serve the CPU's vector units and caches; the GPU schedule reads the
/// plain row-major tensors coalesced.
void optimize_for_gpu(ir::Graph& g, const CudaCompileOptions& opts) {
    const std::string why = host_only_reason(g);
    KILN_CHECK(why.empty(), kUnsupported) << "cannot compile graph '" << g.name << "' for the GPU: " << why;
    bind_input_shapes(g, opts.dims);
    std::vector<pass::Pass> passes, fusion, cleanup;
    for (pass::Pass& p : pass::passes_for_level(opts.opt_level)) {
        if (p.name == "transform-layout" || p.name == "pack-matmul-weights") continue;
        if (p.name == "eliminate-dead-code" || p.name == "infer-shapes") cleanup.push_back(p);
        (p.name == "fuse-operators" ? fusion : passes).push_back(std::move(p));
    }
    pass::run_passes(g, passes, pass_context(), {});
    if (opts.math == GpuMath::kFp16) {  // after the folds (BatchNorm folded in FP32), before fusion
        convert_to_half(g);
        pass::run_passes(g, cleanup, pass_context(), {});
    }
    pass::run_passes(g, fusion, pass_context(), {});
    ir::verify_graph(g);
}

int add_buffer(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const ir::Value* v, BufferRole role) {
    KILN_CHECK(v->type().is_static(), kUnsupported)
        << "--device cuda needs static shapes: value '" << v->name() << "' is " << v->type().str() << " (bind its dims with --dim)";
    BufferDesc b;
    b.name = v->name();
    b.dtype = v->type().dtype;
    b.shape = v->type().static_shape();
    b.role = role;
    if (role == BufferRole::kConstant) b.constant = v->constant();
    p.buffers.push_back(std::move(b));
    return buffer_of[v] = static_cast<int>(p.buffers.size()) - 1;
}

/// kUnsupported naming the node when a unit has no CUDA kernel (and, with `cpu_fallback`, no
/// CPU kernel the runner can place on the host either).
void check_unit_has_cuda_kernel(const KernelUnit& unit, bool cpu_fallback) {
    static const te::KnobValues kUntuned;
    for (const ir::Node* n : unit.nodes) {
        const op::OpDef* def = op::OpRegistry::global().find(n->op());
        KILN_CHECK(def && def->compute, kUnsupported)
            << "no CUDA kernel for " << n->describe() << ": op " << n->op() << " has no tensor-expression compute "
            << "(run this model on the CPU: --device cpu)";
    }
    KILN_CHECK(cpu_fallback || !extern_choice(unit, KernelSource::kGenerated, kUntuned), kUnsupported)
        << "no CUDA kernel for " << unit.nodes.front()->describe() << " (" << unit.ops()
        << "): the CPU runtime computes it with its own kernel (allow CPU placement, or run on the CPU)";
}

/// A unit the CPU runtime computes with its own kernel (TopK, CumSum, ScatterND), placed on the
/// host: false when the unit has a CUDA kernel.
bool add_host_step(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const KernelUnit& unit) {
    static const te::KnobValues kUntuned;
    std::optional<topi::ExternChoice> ext = extern_choice(unit, KernelSource::kGenerated, kUntuned);
    if (!ext) return false;
    runtime::cuda::CudaStepDesc step;
    step.node_name = unit.nodes.front()->name();
    step.host_extern = ext->name;
    step.host_params = runtime::ExternParams::format(ext->params);
    step.num_inputs = static_cast<int>(unit.inputs.size());
    for (const ir::Value* v : unit.inputs) step.args.push_back(buffer_of.at(v));
    for (const ir::Value* v : unit.outputs) step.args.push_back(add_buffer(p, buffer_of, v, BufferRole::kIntermediate));
    p.steps.push_back(std::move(step));
    return true;
}

/// A unit compiled for the CPU as a program of its own (a unit pinned there): the unit's
/// non-constant inputs are the program's inputs, its constants stay constants, its outputs are
/// the program's outputs; the step's args are the same values' buffers in that order.
void add_host_program_step(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const KernelUnit& unit) {
    ir::Graph sub;
    sub.name = "host/" + unit.nodes.front()->name();
    std::unordered_map<const ir::Value*, ir::Value*> value_of;
    runtime::cuda::CudaStepDesc step;
    step.node_name = unit.nodes.front()->name();
    for (const ir::Value* v : unit.inputs) {
        if (v->is_constant()) {
            value_of[v] = sub.add_constant(v->name(), v->constant());
            continue;
        }
        value_of[v] = sub.add_input(v->name(), v->type());
        step.args.push_back(buffer_of.at(v));
    }
    for (const ir::Node* n : unit.nodes) {
        std::vector<ir::Value*> ins;
        for (const ir::Value* v : n->inputs()) ins.push_back(v ? value_of.at(v) : nullptr);
        std::vector<ir::TensorType> types;
        std::vector<std::string> names;
        for (const ir::Value* v : n->outputs()) {
            types.push_back(v->type());
            names.push_back(v->name());
        }
        ir::AttrMap attrs = n->attrs();
        attrs.erase(pass::kDeviceAttr);
        ir::Node* copy = sub.add_node(n->op(), ins, std::move(attrs), types, names, n->name());
        for (size_t i = 0; i < n->num_outputs(); ++i) value_of[n->output(i)] = copy->output(i);
    }
    step.num_inputs = static_cast<int>(step.args.size());
    for (const ir::Value* v : unit.outputs) {
        sub.add_output(value_of.at(v));
        step.args.push_back(add_buffer(p, buffer_of, v, BufferRole::kIntermediate));
    }
    CompileOptions co;
    co.compile_jobs = 1;
    step.host_program = compile(sub, co).executable;
    p.steps.push_back(std::move(step));
}

/// A unit the placement put on the CPU: the runtime's own kernel where it has one (TopK,
/// CumSum, ScatterND), else a CPU program of the unit.
void add_unit_on_host(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const KernelUnit& unit,
                      const pass::NodePlace& place, bool cpu_fallback) {
    if (place.reason == pass::PlaceReason::kNoKernel) check_unit_has_cuda_kernel(unit, cpu_fallback);
    KILN_CHECK(cpu_fallback, kUnsupported) << unit.nodes.front()->describe() << " is placed on the CPU ("
                                           << pass::place_reason_name(place.reason) << ") but CPU placement is off";
    if (!add_host_step(p, buffer_of, unit)) add_host_program_step(p, buffer_of, unit);
}

/// Every unit's device (pass/place_devices.h): pins, then the rule that a unit only the CPU
/// runtime computes (an extern kernel) or an op without a compute goes to the host, then the
/// GPU, or the cost model's choice with place_by_cost. Shapes are static and folded here, so the
/// shape-computation rule is off.
pass::Placement place_units(const ir::Graph& g, const std::vector<KernelUnit>& units, const CudaCompileOptions& opts) {
    static const te::KnobValues kUntuned;
    std::unordered_set<const ir::Node*> host_only;
    for (const KernelUnit& u : units)
        if (extern_choice(u, KernelSource::kGenerated, kUntuned)) host_only.insert(u.nodes.begin(), u.nodes.end());
    pass::PlacementOptions po;
    po.target = pass::Device::kCuda;
    po.pins = opts.pins;
    po.op_pins = opts.op_pins;
    po.has_kernel = [&host_only](const ir::Node& n, pass::Device d) {  // called inside place_devices only
        if (d == pass::Device::kCpu) return true;
        const op::OpDef* def = op::OpRegistry::global().find(n.op());
        return def && def->compute && !host_only.count(&n);
    };
    po.host_shape_elements = -1;
    po.by_cost = opts.place_by_cost;
    po.cost = opts.cost;
    return pass::place_devices(g, po);
}

/// A step cuBLAS computes: args A, B, out; a Gemm's beta*C as a constant copied into out first.
void add_cublas_step(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const ir::Node& n,
                     CublasChoice c) {
    runtime::cuda::CudaStepDesc step;
    step.node_name = n.name();
    step.args = {buffer_of.at(n.input(0)), buffer_of.at(n.input(1)),
                 add_buffer(p, buffer_of, n.output(0), BufferRole::kIntermediate)};
    step.num_inputs = 2;
    if (c.init.defined()) {
        BufferDesc b;
        b.name = n.name() + ".beta_c";
        b.dtype = c.init.dtype();  // the product's dtype (FP16 in an FP16 compile)
        b.shape = c.init.shape();
        b.role = BufferRole::kConstant;
        b.constant = c.init;
        p.buffers.push_back(std::move(b));
        c.gemm.init = static_cast<int>(p.buffers.size()) - 1;
    }
    step.gemm = c.gemm;
    step.flops = 2.0 * c.gemm.m * c.gemm.n * c.gemm.k * c.gemm.batch;
    p.steps.push_back(std::move(step));
}

/// A step cuDNN computes: args X, W, Y (the bias is in the epilogue: split_cudnn_convs).
void add_cudnn_step(CudaProgram& p, std::unordered_map<const ir::Value*, int>& buffer_of, const ir::Node& n,
                    const runtime::cuda::CudaConvDesc& conv) {
    runtime::cuda::CudaStepDesc step;
    step.node_name = n.name();
    step.is_conv = true;
    step.conv = conv;
    step.args = {buffer_of.at(n.input(0)), buffer_of.at(n.input(1)),
                 add_buffer(p, buffer_of, n.output(0), BufferRole::kIntermediate)};
    step.num_inputs = 2;
    step.flops = conv.flops();
    p.steps.push_back(std::move(step));
}

/// The kernel `k` in the program (NVRTC, or the kernel cache; one copy per distinct source):
/// its index. `stoppable`: emitted with the stop flag (CudaCompileOptions::preemptible).
int add_kernel(CudaCompiledModel& out, std::unordered_map<std::string, int>& kernel_of_source, const codegen::CudaKernel& k,
               const std::string& description, int arch, bool stoppable = false) {
    CudaProgram& p = *out.program;
    auto [it, fresh] = kernel_of_source.emplace(k.source, static_cast<int>(p.kernels.size()));
    if (fresh) {
        codegen::CompiledCubin cubin = codegen::compile_cuda(k.source, arch);
        out.compiled += cubin.from_cache ? 0 : 1;
        runtime::cuda::CudaKernelDesc kd{std::move(cubin.cubin), {}, k.scratch_bytes, k.scratch_names, description,
                                         stoppable};
        for (const codegen::CudaLaunch& l : k.launches)
            kd.entries.push_back({l.entry, static_cast<unsigned>(l.grid), static_cast<unsigned>(l.block)});
        p.kernels.push_back(std::move(kd));
        out.kernel_sources.push_back(k.source);
    }
    return it->second;
}

/// A LayerNormalization or Softmax as one row kernel (codegen/cuda_row_kernels.h): args are the
/// node's inputs in order (X, Scale, B), then Y.
void add_row_kernel_step(CudaCompiledModel& out, std::unordered_map<const ir::Value*, int>& buffer_of,
                         std::unordered_map<std::string, int>& kernel_of_source, const ir::Node& n,
                         const codegen::RowKernelSpec& spec, int arch) {
    CudaProgram& p = *out.program;
    runtime::cuda::CudaStepDesc step;
    step.node_name = n.name();
    for (const ir::Value* v : n.inputs())
        if (v) step.args.push_back(buffer_of.at(v));
    step.num_inputs = static_cast<int>(step.args.size());
    step.args.push_back(add_buffer(p, buffer_of, n.output(0), BufferRole::kIntermediate));
    step.flops = 8.0 * static_cast<double>(spec.rows) * spec.cols;
    step.kernel = add_kernel(out, kernel_of_source, codegen::emit_row_kernel(spec), n.op() + " (row kernel)", arch);
    p.steps.push_back(std::move(step));
    ++out.row_kernel_steps;
}

/// The static memory plan of the intermediates (plan/memory_plan.h; sequential, as the steps
/// run in order on one stream): each gets an offset in one device arena, reusing the bytes of
/// buffers no later step reads. Inputs, outputs and constants keep allocations of their own.
/// No step computes in place: a generated kernel may read an input after writing its output.
void plan_device_memory(CudaProgram& p) {
    plan::PlanProblem prob;
    prob.num_steps = static_cast<int>(p.steps.size());
    prob.tensors.resize(p.buffers.size());
    for (size_t b = 0; b < p.buffers.size(); ++b) {
        prob.tensors[b].name = p.buffers[b].name;
        prob.tensors[b].bytes = p.buffers[b].nbytes();
        prob.tensors[b].pinned = p.buffers[b].role != BufferRole::kIntermediate;
    }
    for (size_t i = 0; i < p.steps.size(); ++i) {
        const runtime::cuda::CudaStepDesc& s = p.steps[i];
        KILN_ICHECK(s.num_inputs >= 0) << "step " << s.node_name << " has no input count";
        for (size_t a = 0; a < s.args.size(); ++a) {
            plan::PlanTensor& t = prob.tensors[s.args[a]];
            if (static_cast<int>(a) < s.num_inputs) {
                t.readers.push_back(static_cast<int>(i));
            } else if (t.producer < 0) {
                t.producer = static_cast<int>(i);
            }
        }
    }
    for (plan::PlanTensor& t : prob.tensors) t.pinned |= t.producer < 0;
    const plan::MemoryPlan plan = plan::plan_memory(prob);
    plan::verify_plan(prob, plan);
    for (size_t b = 0; b < p.buffers.size(); ++b) p.buffers[b].arena_offset = plan.offsets[b];
    p.arena_bytes = plan.arena_bytes;
}

/// The GPU pipeline and the vendor libraries' splits (cuBLAS's products leave their fusion
/// groups, cuDNN's convs their biases) where those libraries load.
void prepare_graph_for_gpu(ir::Graph& g, const CudaCompileOptions& opts, bool cublas, bool cudnn) {
    optimize_for_gpu(g, opts);
    if (cublas && opts.opt_level > 0) detach_cublas_anchors(g);
    if (cudnn) split_cudnn_convs(g);
}

}  // namespace

std::string cuda_placement_report(ir::Graph& g, const CudaCompileOptions& opts) {
    prepare_graph_for_gpu(g, opts, opts.use_cublas && runtime::cuda::cublas_api(nullptr) != nullptr,
                          opts.use_cudnn && runtime::cuda::cudnn_api(nullptr) != nullptr);
    const pass::Placement placement = place_units(g, partition_kernels(g), opts);
    const std::string summary = pass::placement_summary(g, placement);
    pass::insert_device_copies(g, placement);
    return ir::print_graph(g, {.max_constant_elements = 16}) + summary;
}

CudaCompiledModel compile_cuda(ir::Graph& g, const CudaCompileOptions& opts) {
    const auto t0 = std::chrono::steady_clock::now();

    CudaCompiledModel out;
    out.program = std::make_shared<CudaProgram>();
    CudaProgram& p = *out.program;
    p.arch = opts.arch;
    p.tf32 = opts.math != GpuMath::kFp32;
    std::unordered_map<const ir::Value*, int> buffer_of;
    const bool cublas = opts.use_cublas && runtime::cuda::cublas_api(nullptr) != nullptr;
    const bool cudnn = opts.use_cudnn && runtime::cuda::cudnn_api(nullptr) != nullptr;
    prepare_graph_for_gpu(g, opts, cublas, cudnn);
    for (ir::Value* in : g.inputs()) p.inputs.push_back(add_buffer(p, buffer_of, in, BufferRole::kInput));
    std::vector<KernelUnit> units = partition_kernels(g);
    out.placement = place_units(g, units, opts);
    std::unordered_map<std::string, int> kernel_of_source;
    for (const KernelUnit& unit : units) {
        for (const ir::Value* in : unit.inputs)
            if (in->is_constant() && !buffer_of.count(in)) add_buffer(p, buffer_of, in, BufferRole::kConstant);
        if (is_view_unit(unit, g, opts.opt_level)) {  // a view: the input's buffer
            buffer_of[unit.nodes[0]->output(0)] = buffer_of.at(unit.nodes[0]->input(0));
            continue;
        }
        if (const pass::NodePlace& place = out.placement.of.at(unit.nodes.front()); place.device == pass::Device::kCpu) {
            add_unit_on_host(p, buffer_of, unit, place, opts.cpu_fallback);
            ++out.host_steps;
            continue;
        }
        if (cudnn && unit.nodes.size() == 1) {
            if (std::optional<runtime::cuda::CudaConvDesc> c = cudnn_conv_choice(*unit.nodes[0])) {
                add_cudnn_step(p, buffer_of, *unit.nodes[0], *c);
                ++out.cudnn_steps;
                continue;
            }
        }
        if (cublas && unit.nodes.size() == 1) {
            if (std::optional<CublasChoice> c = cublas_choice(*unit.nodes[0])) {
                add_cublas_step(p, buffer_of, *unit.nodes[0], std::move(*c));
                ++out.cublas_steps;
                continue;
            }
        }
        if (opts.row_kernels && !opts.preemptible) {
            if (std::optional<codegen::RowKernelSpec> rk = row_kernel_choice(unit)) {
                add_row_kernel_step(out, buffer_of, kernel_of_source, *unit.nodes[0], *rk, opts.arch);
                continue;
            }
        }
        check_unit_has_cuda_kernel(unit, opts.cpu_fallback);
        runtime::cuda::CudaStepDesc step;
        for (const ir::Value* v : unit.inputs) step.args.push_back(buffer_of.at(v));
        step.num_inputs = static_cast<int>(step.args.size());
        for (const ir::Value* v : unit.outputs) step.args.push_back(add_buffer(p, buffer_of, v, BufferRole::kIntermediate));
        CudaLoweredKernel k = lower_unit_cuda(unit, {.warp_reductions = opts.warp_reductions, .stop_flag = opts.preemptible});
        step.node_name = k.node_name;
        step.flops = k.flops;
        step.kernel = add_kernel(out, kernel_of_source, k.cuda, k.description, opts.arch, opts.preemptible);
        p.steps.push_back(std::move(step));
    }
    for (ir::Value* v : g.outputs()) {
        if (!buffer_of.count(v)) add_buffer(p, buffer_of, v, BufferRole::kConstant);
        int id = buffer_of.at(v);
        if (p.buffers[id].role == BufferRole::kIntermediate) p.buffers[id].role = BufferRole::kOutput;
        p.outputs.push_back(id);
    }
    plan_device_memory(p);
    out.kernels = static_cast<int>(p.kernels.size());
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace kiln::compiler
