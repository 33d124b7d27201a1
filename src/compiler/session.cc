// kiln::Session: import once, compile per specialization, keep the specializations seen
// (a bounded LRU cache), run each with the runner's executors.
//
// A specialization is the set of facts compile() needs that the model may leave open: the
// values of symbolic input dimensions, and the values of graph inputs that feed an op's value
// input (a Reshape target given as a graph input). When every such fact is known at load time
// (dims given in the options, no value inputs fed by graph inputs) the model compiles in load();
// SessionOptions::specialize compiles more at load; any other compiles at the first run that
// brings it. Compiled specializations stay in a cache keyed by those facts (at most
// SessionOptions::max_specializations, least recently used out), so runs alternating between
// shapes seen before are warm: no import, no passes, no compile (docs/dynamic_shapes.md).
//
// Memory: each compile imports the model afresh (its graph is rewritten by the passes) and the
// ConstantPool makes every constant of the new executable that equals one held already (the
// weights, packed weights of the same layout) share that one's storage, so weights are held
// once however many specializations are cached; what differs per specialization is its steps,
// its kernels' handles and its intermediates' arena (bound at its first run).
//
// Threads: a warm run takes the cache's short lock, then an idle executor of its
// specialization; compiles are serialized (compile_mu_) and a key being compiled is waited for,
// never compiled twice. A compiled `.kiln` artifact (runtime/artifact.h) is not compiled:
// Session::load hands it to the runtime's artifact session.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "compiler/constant_pool.h"
#include "compiler/dim_ranges.h"
#include "compiler/graph_interpreter.h"
#include "compiler/model_compile_options.h"
#include "compiler/vm_model.h"
#include "compiler/session_specialization.h"
#include "compiler/specialization_cache.h"
#include "compiler/kernel_upgrade.h"
#include "compiler/symbolic_compile.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "kiln/session.h"
#include "op/registry.h"
#include "runtime/artifact.h"
#include "runtime/dnnl_kernels.h"
#include "runtime/model_runner.h"
#include "runtime/output_binding.h"
#include "runtime/session_inputs.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::vector<std::map<std::string, int64_t>> specialization_combinations(
    const std::map<std::string, std::vector<int64_t>>& sizes) {
    if (sizes.empty()) return {};
    std::vector<std::map<std::string, int64_t>> combos(1);
    for (const auto& [name, values] : sizes) {
        std::vector<std::map<std::string, int64_t>> next;
        for (const auto& c : combos)
            for (int64_t v : values) {
                next.push_back(c);
                next.back()[name] = v;
            }
        combos.swap(next);
    }
    return combos;
}

namespace {

class SessionImpl final : public Session {
public:
    SessionImpl(std::string path, const SessionOptions& opts)
        : path_(std::move(path)),
          opts_(opts),
          runner_(runtime::runner_options(opts)),
          cache_(static_cast<size_t>(std::max(0, opts.max_specializations))) {
        auto t0 = Clock::now();
        stats_.intra_op_threads = runner_.stats().intra_op_threads;
        ir::Graph g = frontend::import_onnx_file(path_);
        for (ir::Value* v : g.inputs()) inputs_.push_back(info_of(*v));
        for (ir::Value* v : g.outputs()) outputs_.push_back(info_of(*v));
        for (const TensorInfo& t : inputs_)
            for (const std::string& sym : t.symbols)
                if (!sym.empty()) symbols_.insert(sym);
        for (const ir::Value* c : g.constants()) stats_.weight_bytes += c->constant().nbytes();
        value_inputs_ = compiler::value_fed_inputs(g);
        // Check every op is known now, so an unsupported op fails at load, not at first run.
        for (ir::Node* n : g.nodes())
            KILN_CHECK(op::OpRegistry::global().find(n->op()), kUnsupported)
                << "unsupported op '" << n->op() << "' (" << n->describe() << ")";
        check_specialize_option();
        compiler::check_dim_ranges(opts_.dim_ranges, symbols_, opts_.dims, opts_.specialize);
        stats_.interpreter_reason =
            compiler::interpreter_reason(g, std::vector<std::string>(value_inputs_.begin(), value_inputs_.end()));
        if (!stats_.interpreter_reason.empty()) {
            // Runs node by node; no pass pipeline, no whole-model compile.
            stats_.interpreted = true;
            stats_.executor = "interpreter";
            interp_graph_ = std::make_shared<const ir::Graph>(std::move(g));
            interpreter_ = std::make_unique<compiler::GraphInterpreter>(interp_graph_, runner_.intra_pool(),
                                                                       runner_.allocator());
            start_vm();
            stats_.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            return;
        }
        bool all_dims_known = true;
        for (const std::string& sym : symbols_) all_dims_known &= opts_.dims.count(sym) > 0;
        if (opts_.symbolic_shapes) g = try_symbolic(std::move(g), all_dims_known);
        if (symbolic_) {
            stats_.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            return;
        }
        if (all_dims_known && value_inputs_.empty()) {
            std::optional<ir::Graph> imported(std::move(g));  // the first compile needs no second import
            cache_.get(compiler::specialization_key(opts_.dims, {}),
                       [&] { return compile_one(opts_.dims, {}, std::move(imported)); });
        }
        for (const std::map<std::string, int64_t>& dims : specialization_combinations(opts_.specialize)) specialize(dims);
        stats_.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }

    const std::vector<TensorInfo>& inputs() const override { return inputs_; }
    const std::vector<TensorInfo>& outputs() const override { return outputs_; }

    std::vector<Datum> run_values(const std::map<std::string, Datum>& given, const RunOptions& ropts) override {
        if (!interpreter_) {
            std::map<std::string, Tensor> tensors;
            for (const auto& [name, d] : given) tensors[name] = d.tensor("input '" + name + "'");
            std::vector<Tensor> outs = run(tensors, ropts);
            return std::vector<Datum>(outs.begin(), outs.end());
        }
        runtime::check_input_names(inputs_, given);
        std::vector<Datum> ordered;
        for (const TensorInfo& info : inputs_) {
            auto it = given.find(info.name);
            KILN_CHECK(it != given.end(), kInvalidArgument) << "missing input '" << info.name << "'";
            check_value(info, it->second);
            if (it->second.is_tensor())
                for (size_t d = 0; d < info.symbols.size() && d < it->second.tensor().shape().size(); ++d)
                    check_range(info, d, it->second.tensor().shape()[d]);
            ordered.push_back(it->second);
        }
        const std::vector<const Tensor*> bound = runtime::order_outputs_into(outputs_, ropts.outputs_into);
        KILN_CHECK(!(ropts.terminate && ropts.terminate->load()), kCancelled)
            << "run terminated (RunOptions::terminate) before it started";
        // Preemption and max_threads do not apply here: an interpreted run runs to completion
        // (a Preemption stays not suspended) on the session's threads. terminate stops a VM
        // run before its next loop iteration (an endless while loop can be stopped).
        // The interpreter and the VM keep per-run state (register files, node executors): one
        // run at a time.
        std::lock_guard<std::mutex> lock(interpreter_mu_);
        std::vector<Datum> outs = vm_ ? run_vm(ordered, ropts.terminate) : interpreter_->run(ordered);
        runtime::copy_outputs_into(outputs_, bound, outs);  // no in-place outputs here
        return outs;
    }

    /// SessionOptions::symbolic_shapes: compiles the model once for every value of its unbound
    /// dims. A model that cannot (an op outside the subset, shape-deciding inputs, nothing
    /// symbolic) keeps the per-shape path, with the reason in the stats. Returns the graph when
    /// it was not consumed.
    ir::Graph try_symbolic(ir::Graph g, bool all_dims_known) {
        std::string why;
        if (!value_inputs_.empty()) why = "graph input '" + *value_inputs_.begin() + "' decides a shape";
        else if (all_dims_known) why = "every dimension is bound (SessionOptions::dims)";
        else if (!opts_.specialize.empty()) why = "SessionOptions::specialize asks for per-shape compiles";
        else why = compiler::symbolic_prefilter(g);
        if (!why.empty()) {
            stats_.symbolic_reason = why;
            return g;
        }
        try {
            cache_.get(compiler::kSymbolicKey, [&] { return compile_one({}, {}, std::move(g), true); });
            symbolic_ = true;
            stats_.symbolic = true;
            return ir::Graph();
        } catch (const Error& e) {
            // The symbolic path is a subset: whatever it refuses compiles per shape, unchanged
            // (from a fresh import: the attempt rewrote the graph).
            stats_.symbolic_reason = e.what();
        }
        return frontend::import_onnx_file(path_);
    }

    /// Control flow only (If/Loop/Scan on an otherwise compilable top level): the VM runs it
    /// (compiler/vm_model.h); the interpreter stays for what the lowering refuses.
    void start_vm() {
        const std::string refusal = compiler::vm_refusal(*interp_graph_);
        if (!refusal.empty()) return;
        compiler::LowerContext ctx;
        ctx.compile = compiler::compile_options_for(opts_, runner_.stats().intra_op_threads);
        ctx.pool = runner_.intra_pool();
        ctx.alloc = runner_.allocator();
        vm_ = std::make_unique<compiler::VmModel>(interp_graph_, std::move(ctx),
                                                  static_cast<size_t>(std::max(0, opts_.max_specializations)));
        stats_.interpreted = false;
        stats_.executor = "vm";
        stats_.control_flow = "vm: lowered at the first run of each input shape (" + stats_.interpreter_reason + ")";
        stats_.interpreter_reason.clear();
    }

    /// One VM run; a model the lowering refuses at these shapes goes to the interpreter for good.
    std::vector<Datum> run_vm(const std::vector<Datum>& ordered, const std::atomic<bool>* terminate) {
        std::vector<Tensor> tensors;
        for (size_t i = 0; i < ordered.size(); ++i) tensors.push_back(ordered[i].tensor("input '" + inputs_[i].name + "'"));
        runtime::vm::VirtualMachine* machine = nullptr;
        try {
            machine = &vm_->machine(tensors);
        } catch (const Error& e) {
            std::lock_guard<std::mutex> stats_lock(stats_mu_);
            stats_.interpreted = true;
            stats_.executor = "interpreter";
            stats_.interpreter_reason = std::string("the VM could not lower the model: ") + e.what();
            stats_.control_flow.clear();
            vm_.reset();
            return interpreter_->run(ordered);
        }
        {
            std::lock_guard<std::mutex> stats_lock(stats_mu_);
            const compiler::ControlFlowLowering& l = vm_->last();
            stats_.kernels = l.kernels;
            stats_.control_flow = "vm: " + std::to_string(l.segments) + " compiled segments, " +
                                  std::to_string(l.bodies_compiled) + " bodies compiled, " +
                                  std::to_string(l.bodies_interpreted) + " bodies and " +
                                  std::to_string(l.segments_interpreted) + " segments in the graph interpreter";
            for (const std::string& note : l.notes) stats_.control_flow += "\n  " + note;
        }
        std::vector<Tensor> outs = compiler::VmModel::run(*machine, tensors, terminate);
        return std::vector<Datum>(outs.begin(), outs.end());
    }

    std::vector<Tensor> run(const std::map<std::string, Tensor>& given, const RunOptions& ropts) override {
        if (interpreter_) {
            std::map<std::string, Datum> values(given.begin(), given.end());
            std::vector<Tensor> outs;
            std::vector<Datum> got = run_values(values, ropts);
            for (size_t i = 0; i < got.size(); ++i)
                outs.push_back(got[i].tensor("output '" + outputs_[i].name + "' (use run_values for sequences and optionals)"));
            return outs;
        }
        runtime::check_input_names(inputs_, given);
        return run_compiled(given, ropts);
    }

    /// A value given for input `info` of an interpreted model: its kind, dtype and rank.
    static void check_value(const TensorInfo& info, const Datum& d) {
        const bool optional = info.kind == ValueKind::kOptionalTensor || info.kind == ValueKind::kOptionalSequence;
        const bool sequence = info.kind == ValueKind::kSequence || info.kind == ValueKind::kOptionalSequence;
        if (d.is_none()) {
            KILN_CHECK(optional, kInvalidArgument) << "input '" << info.name << "': expected " << expected_str(info)
                                                   << ", got an empty optional";
            return;
        }
        KILN_CHECK(d.is_sequence() == sequence, kInvalidArgument)
            << "input '" << info.name << "': expected " << expected_str(info) << ", got " << d.str();
        KILN_CHECK(d.elem_dtype() == info.dtype, kInvalidArgument)
            << "input '" << info.name << "': expected dtype " << dtype_name(info.dtype) << ", got " << dtype_name(d.elem_dtype());
        if (d.is_tensor() && info.kind == ValueKind::kTensor) {
            KILN_CHECK(d.tensor().shape().size() == info.shape.size(), kInvalidArgument)
                << "input '" << info.name << "': expected shape " << expected_str(info) << " (rank " << info.shape.size()
                << "), got " << shape_str(d.tensor().shape());
        }
    }

    std::vector<Tensor> run_compiled(const std::map<std::string, Tensor>& given, const RunOptions& ropts) {
        const std::vector<const Tensor*> bound = runtime::order_outputs_into(outputs_, ropts.outputs_into);
        KILN_CHECK(bound.empty() || !ropts.preempt, kInvalidArgument)
            << "RunOptions: outputs_into cannot be used with preempt";
        std::map<std::string, int64_t> dims = opts_.dims;
        std::vector<Tensor> ordered;
        for (const TensorInfo& info : inputs_) {
            auto it = given.find(info.name);
            KILN_CHECK(it != given.end(), kInvalidArgument) << "missing input '" << info.name << "'";
            const Tensor& t = it->second;
            KILN_CHECK(t.dtype() == info.dtype, kInvalidArgument)
                << "input '" << info.name << "': expected dtype " << dtype_name(info.dtype) << ", got " << dtype_name(t.dtype());
            KILN_CHECK(t.shape().size() == info.shape.size(), kInvalidArgument)
                << "input '" << info.name << "': expected shape " << expected_str(info) << " (rank " << info.shape.size()
                << "), got " << shape_str(t.shape());
            for (size_t d = 0; d < info.shape.size(); ++d) {
                if (info.symbols[d].empty()) {
                    KILN_CHECK(t.shape()[d] == info.shape[d], kInvalidArgument)
                        << "input '" << info.name << "': expected shape " << expected_str(info) << ", got " << shape_str(t.shape());
                    continue;
                }
                check_range(info, d, t.shape()[d]);
                auto [dit, fresh] = dims.emplace(info.symbols[d], t.shape()[d]);
                KILN_CHECK(dit->second == t.shape()[d], kInvalidArgument)
                    << "input '" << info.name << "': dimension '" << info.symbols[d] << "' is " << dit->second
                    << " elsewhere, got " << t.shape()[d] << " (shape " << shape_str(t.shape()) << ")";
            }
            ordered.push_back(t);
        }
        std::map<std::string, Tensor> frozen;
        for (const std::string& name : value_inputs_) frozen[name] = given.at(name);
        std::vector<Tensor> outs;
        runtime::RunControls controls = runtime::run_controls(ropts);
        if (ropts.preempt && runner_.holds_suspended(*ropts.preempt)) {
            // A suspended run resumes on the executable it started with (its state holds it),
            // even if the cache has dropped that specialization since: no key, no lookup.
            runner_.run(runtime_inputs_of(ordered), outs, controls).throw_if_error();
            return outs;
        }
        std::shared_ptr<const compiler::Specialization> spec = specialization(dims, frozen);
        if (!bound.empty()) {
            // The kernels write the bound outputs in place (BufferTable::bind): shapes are known now.
            const runtime::Executable& exe = *spec->prepared->exe;
            for (size_t j = 0; j < bound.size(); ++j)
                if (bound[j]) runtime::check_output_into(outputs_[j], *bound[j], output_shape(exe, j, dims));
            controls.outputs_into = &bound;
        }
        runner_.run(*spec->prepared, runtime_inputs_of(ordered), outs, controls).throw_if_error();
        return outs;
    }

    /// Output j's shape in this run: a symbolic executable's at the run's dims.
    static Shape output_shape(const runtime::Executable& exe, size_t j, const std::map<std::string, int64_t>& dims) {
        const runtime::BufferDesc& d = exe.buffers[exe.outputs[j]];
        if (!d.is_symbolic()) return d.shape;
        std::vector<int64_t> values;
        for (const std::string& name : exe.dims) {
            auto it = dims.find(name);
            KILN_CHECK(it != dims.end(), kInternal) << "bug in Kiln: symbolic dim '" << name << "' unbound in a run";
            values.push_back(it->second);
        }
        return d.shape_at(values);
    }

    /// Frozen inputs are constants of the executable: the runtime inputs are the others.
    std::vector<Tensor> runtime_inputs_of(const std::vector<Tensor>& ordered) const {
        std::vector<Tensor> runtime_inputs;
        for (size_t i = 0; i < inputs_.size(); ++i)
            if (!value_inputs_.count(inputs_[i].name)) runtime_inputs.push_back(ordered[i]);
        return runtime_inputs;
    }

    std::string inspect() override {
        if (vm_) {
            // Lowered for the declared shapes when they are all static (else at the first run).
            std::lock_guard<std::mutex> lock(interpreter_mu_);
            bool all_static = !vm_->last().program;
            for (const TensorInfo& t : inputs_)
                for (const std::string& sym : t.symbols) all_static &= sym.empty();
            std::string note;
            if (all_static) {
                std::vector<Tensor> zeros;
                for (const TensorInfo& t : inputs_) zeros.emplace_back(t.dtype, t.shape);
                try {
                    (void)vm_->machine(zeros);
                } catch (const Error& e) {
                    // Not at zero-filled inputs (a shape read from an input's data): at run time the
                    // real values decide, and the interpreter runs what the VM cannot.
                    note = "// lowering at the declared shapes with zero-filled inputs failed: " +
                           std::string(e.what()).substr(0, std::string(e.what()).find('\n')) + "\n";
                }
            }
            if (!vm_->last().program) {
                ir::PrintOptions popts;
                popts.max_constant_elements = 16;
                return "// runs in the VM (docs/control_flow.md), lowered at the first run of each input shape; what "
                       "does not compile runs in the graph interpreter\n" + note + ir::print_graph(*interp_graph_, popts);
            }
            return "// runs in the VM (docs/control_flow.md)\n" + vm_->program_text();
        }
        if (interpreter_) {
            ir::PrintOptions popts;
            popts.max_constant_elements = 16;
            return "// runs in the graph interpreter: " + stats_.interpreter_reason + "\n" +
                   ir::print_graph(*interp_graph_, popts);
        }
        return shown()->inspect_text;
    }

    SessionStats stats() const override {
        SessionStats s;
        {
            std::lock_guard<std::mutex> lock(stats_mu_);
            s = stats_;
        }
        const compiler::SpecializationCacheStats cs = cache_.stats();
        s.compiles = cs.compiles;
        s.specializations = cs.held;
        s.specialization_evictions = cs.evictions;
        pool_.release();  // what only evicted specializations used
        s.constant_bytes = pool_.bytes();
        if (auto spec = cache_.most_recent()) {
            s.quick_kernels = spec->compile.quick;
            s.optimized_kernels_running = !spec->upgrade || spec->upgrade->done();
            s.optimize_seconds = spec->upgrade ? spec->upgrade->seconds() : 0;
        }
        return s;
    }

    void wait_for_optimized_kernels() override {
        for (const auto& spec : cache_.values())
            if (spec->upgrade) spec->upgrade->wait();
    }

    std::string kernel_list() override {
        if (vm_)
            return std::to_string(vm_->last().kernels) + " kernels in the VM's executables (" + stats_.control_flow +
                   "; each set of input shapes is lowered at its first run, what does not compile runs in the graph "
                   "interpreter)\n";
        if (interpreter_) return "0 kernels (the model runs in the graph interpreter: " + stats_.interpreter_reason + ")\n";
        return shown()->kernel_list;
    }

    void specialize(const std::map<std::string, int64_t>& given) override {
        // Nothing is compiled for an interpreted model; a model with value inputs compiles when
        // a run gives their values (SessionOptions::specialize is refused for it at load).
        if (interpreter_ || !value_inputs_.empty() || symbolic_) return;
        std::map<std::string, int64_t> dims = opts_.dims;
        for (const auto& [name, value] : given) {
            KILN_CHECK(symbols_.count(name), kInvalidArgument)
                << "specialize: no input has a symbolic dimension '" << name << "' (symbols: " << symbol_list() << ")";
            KILN_CHECK(value >= 0, kInvalidArgument) << "specialize: dimension '" << name << "' must be >= 0, got " << value;
            auto [it, fresh] = dims.emplace(name, value);
            KILN_CHECK(it->second == value, kInvalidArgument)
                << "specialize: dimension '" << name << "' is bound to " << it->second << " by the session's dims, got "
                << value;
        }
        for (const std::string& sym : symbols_)
            KILN_CHECK(dims.count(sym), kInvalidArgument)
                << "specialize: symbolic dimension '" << sym << "' has no value (give it with the others, or in dims)";
        (void)specialization(dims, {});
    }

private:
    static TensorInfo info_of(const ir::Value& v) {
        TensorInfo t;
        t.name = v.name();
        t.dtype = v.type().dtype;
        t.kind = static_cast<ValueKind>(v.type().kind);  // same order as ir::TypeKind
        for (const ir::Dim& d : v.type().shape) {
            t.shape.push_back(d.is_static() ? d.value : -1);
            t.symbols.push_back(d.is_static() ? "" : d.symbol);
        }
        return t;
    }

    static std::string expected_str(const TensorInfo& t) {
        std::string s = std::string(dtype_name(t.dtype)) + "[";
        for (size_t d = 0; d < t.shape.size(); ++d) {
            if (d) s += ",";
            s += t.symbols[d].empty() ? std::to_string(t.shape[d]) : t.symbols[d];
        }
        s += "]";
        switch (t.kind) {
            case ValueKind::kTensor: return s;
            case ValueKind::kSequence: return "seq<" + s + ">";
            case ValueKind::kOptionalTensor: return "opt<" + s + ">";
            case ValueKind::kOptionalSequence: return "opt<seq<" + s + ">>";
        }
        return s;
    }

    std::string symbol_list() const {
        std::string out;
        for (const std::string& sym : symbols_) out += (out.empty() ? "" : ", ") + sym;
        return out.empty() ? "none" : out;
    }

    /// SessionOptions::specialize names symbolic dims the options leave unbound, with sizes >= 0.
    /// SessionOptions::dim_ranges: axis d of input `info` (a symbolic one) is `value`.
    void check_range(const TensorInfo& info, size_t d, int64_t value) const {
        if (d < info.symbols.size() && !info.symbols[d].empty())
            compiler::check_dim_value(opts_.dim_ranges, info.symbols[d], value,
                                      "input '" + info.name + "' (axis " + std::to_string(d) + "): ");
    }

    void check_specialize_option() const {
        for (const auto& [name, values] : opts_.specialize) {
            KILN_CHECK(symbols_.count(name), kInvalidArgument)
                << "specialize: no input has a symbolic dimension '" << name << "' (symbols: " << symbol_list() << ")";
            KILN_CHECK(!opts_.dims.count(name), kInvalidArgument)
                << "specialize: dimension '" << name << "' is bound to " << opts_.dims.at(name)
                << " by dims; a bound dim has one value";
            KILN_CHECK(!values.empty(), kInvalidArgument) << "specialize: dimension '" << name << "' lists no sizes";
            KILN_CHECK(value_inputs_.empty(), kInvalidArgument)
                << "specialize: the value of graph input '" << *value_inputs_.begin()
                << "' decides a shape, so the model compiles when a run gives it; it cannot be compiled at load";
        }
    }


    /// The held specialization for these facts, compiled now if needed.
    std::shared_ptr<const compiler::Specialization> specialization(const std::map<std::string, int64_t>& dims,
                                                                   const std::map<std::string, Tensor>& frozen) {
        if (symbolic_)  // one compile serves every shape
            return cache_.get(compiler::kSymbolicKey, [&] { return compile_one({}, {}, std::nullopt, true); });
        bool compiled = false;
        auto spec = cache_.get(compiler::specialization_key(dims, frozen), [&] {
            compiled = true;
            return compile_one(dims, frozen, std::nullopt);
        });
        if (compiled) pool_.release();  // the constants of a specialization evicted just now
        return spec;
    }

    /// One whole-model compile (serialized: a compile uses every core). `imported`: the model
    /// already imported (at load), else it is imported again, since the passes rewrite it.
    std::shared_ptr<const compiler::Specialization> compile_one(const std::map<std::string, int64_t>& dims,
                                                                const std::map<std::string, Tensor>& frozen,
                                                                std::optional<ir::Graph> imported, bool symbolic = false) {
        std::lock_guard<std::mutex> lock(compile_mu_);
        ir::Graph g = imported ? std::move(*imported) : frontend::import_onnx_file(path_);
        auto spec = compiler::compile_specialization(std::move(g), opts_, dims, frozen, runner_, pool_, symbolic);
        std::lock_guard<std::mutex> stats_lock(stats_mu_);
        stats_.executor = spec->runner.executor;
        stats_.inter_op_threads = spec->runner.inter_op_threads;
        stats_.parallel_width = spec->runner.parallel_width;
        stats_.kernels = spec->compile.kernels;
        stats_.compiled = spec->compile.compiled;
        stats_.compile_seconds = spec->compile.seconds;
        return spec;
    }

    /// The specialization inspect(), kernel_list() and memory_report() show: the one used last,
    /// or the one of SessionOptions::dims, compiled now.
    std::shared_ptr<const compiler::Specialization> shown() {
        if (auto spec = cache_.most_recent()) return spec;
        KILN_CHECK(value_inputs_.empty(), kUnsupported)
            << "cannot inspect before a run: graph input '" << *value_inputs_.begin()
            << "' determines a shape; kernels are compiled when its value is known";
        return specialization(opts_.dims, {});
    }

public:
    std::string memory_report() override {
        if (vm_)
            return "no whole-model memory plan: the model runs in the VM, each compiled segment with its own planned "
                   "arena (docs/control_flow.md)\n" + runner_.allocator_report();
        if (interpreter_) return "no static memory plan: the model runs in the graph interpreter\n";
        std::string report = shown()->memory_report + runner_.allocator_report();
#if KILN_HAVE_DNNL
        report += "oneDNN weight copies (this process): " + std::to_string(runtime::dnnl_weight_copy_bytes()) + " bytes\n";
#endif
        return report;
    }

    std::string profile_summary(int top) const override { return runner_.profile_summary(top); }

    void write_profile() const override { runner_.write_profile(); }

private:
    std::string path_;
    SessionOptions opts_;
    runtime::ModelRunner runner_;
    // The pool before the cache: specializations (their executables) die first.
    mutable compiler::ConstantPool pool_;
    compiler::SpecializationCache<compiler::Specialization> cache_;
    std::mutex compile_mu_;  // one whole-model compile at a time
    std::mutex interpreter_mu_;
    mutable std::mutex stats_mu_;  // guards stats_
    std::vector<TensorInfo> inputs_, outputs_;
    std::set<std::string> symbols_;  // the inputs' symbolic dims
    std::set<std::string> value_inputs_;
    bool symbolic_ = false;  // one symbolic compile serves every shape (set at load, then fixed)
    std::shared_ptr<const ir::Graph> interp_graph_;
    std::unique_ptr<compiler::GraphInterpreter> interpreter_;
    std::unique_ptr<compiler::VmModel> vm_;  // control-flow models; null: the interpreter runs them
    SessionStats stats_;
};

}  // namespace

std::unique_ptr<Session> Session::load(const std::string& path, const SessionOptions& opts) {
    if (runtime::is_artifact_file(path)) return runtime::load_artifact_session(path, opts);
    return std::make_unique<SessionImpl>(path, opts);
}

}  // namespace kiln
