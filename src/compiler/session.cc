// kiln::Session: import once, compile per specialization, run with the sequential executor.
//
// A specialization is the set of facts compile() needs that the model may leave open: the
// values of symbolic input dimensions, and the values of graph inputs that feed an op's
// value input (a Reshape target given as a graph input). When every such fact is known at load
// time (dims given in the options, no value inputs fed by graph inputs) the model compiles in
// load(); otherwise it compiles at the first run(), and again whenever a run brings a different
// specialization (each compile is cheap the second time: kernels come from the on-disk cache).
// A compiled `.kiln` artifact (runtime/artifact.h) is not compiled: Session::load hands it to
// the runtime's artifact session.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include "compiler/compile.h"
#include "compiler/model_compile_options.h"
#include "compiler/graph_interpreter.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "kiln/session.h"
#include "op/registry.h"
#include "runtime/artifact.h"
#include "runtime/model_runner.h"
#include "runtime/session_inputs.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

std::string tensor_key(const Tensor& t) {
    std::string s = std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + ":";
    s.append(static_cast<const char*>(t.data()), t.nbytes());
    return s;
}

class SessionImpl final : public Session {
public:
    SessionImpl(std::string path, const SessionOptions& opts)
        : path_(std::move(path)), opts_(opts), runner_(runtime::runner_options(opts)) {
        auto t0 = Clock::now();
        stats_.intra_op_threads = runner_.stats().intra_op_threads;
        ir::Graph g = frontend::import_onnx_file(path_);
        for (ir::Value* v : g.inputs()) inputs_.push_back(info_of(*v));
        for (ir::Value* v : g.outputs()) outputs_.push_back(info_of(*v));
        value_inputs_ = compiler::value_fed_inputs(g);
        // Check every op is known now, so an unsupported op fails at load, not at first run.
        for (ir::Node* n : g.nodes())
            KILN_CHECK(op::OpRegistry::global().find(n->op()), kUnsupported)
                << "unsupported op '" << n->op() << "' (" << n->describe() << ")";
        stats_.interpreter_reason =
            compiler::interpreter_reason(g, std::vector<std::string>(value_inputs_.begin(), value_inputs_.end()));
        if (!stats_.interpreter_reason.empty()) {
            // Runs node by node; no pass pipeline, no whole-model compile.
            stats_.interpreted = true;
            stats_.executor = "interpreter";
            interp_graph_ = std::make_shared<const ir::Graph>(std::move(g));
            interpreter_ = std::make_unique<compiler::GraphInterpreter>(interp_graph_, runner_.intra_pool(),
                                                                       runner_.allocator());
            stats_.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            return;
        }
        bool all_dims_known = true;
        for (const TensorInfo& t : inputs_)
            for (const std::string& s : t.symbols)
                if (!s.empty() && !opts_.dims.count(s)) all_dims_known = false;
        if (all_dims_known && value_inputs_.empty()) {
            specialize(std::move(g), opts_.dims, {});
            key_ = specialization_key(opts_.dims, {});
        }
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
            ordered.push_back(it->second);
        }
        KILN_CHECK(!(ropts.terminate && ropts.terminate->load()), kCancelled)
            << "run terminated (RunOptions::terminate) before it started";
        // Preemption and max_threads do not apply here: an interpreted run runs to completion
        // (a Preemption stays not suspended) on the session's threads.
        // The interpreter keeps per-run state in its nodes' executors: one run at a time.
        std::lock_guard<std::mutex> lock(interpreter_mu_);
        return interpreter_->run(ordered);
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
        if (d.is_tensor() && info.kind == ValueKind::kTensor)
            KILN_CHECK(d.tensor().shape().size() == info.shape.size(), kInvalidArgument)
                << "input '" << info.name << "': expected shape " << expected_str(info) << " (rank " << info.shape.size()
                << "), got " << shape_str(d.tensor().shape());
    }

    std::vector<Tensor> run_compiled(const std::map<std::string, Tensor>& given, const RunOptions& ropts) {
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
        const runtime::RunControls controls = runtime::run_controls(ropts);
        if (ropts.preempt && runner_.holds_suspended(*ropts.preempt)) {
            // A suspended run resumes on the executable it started with (its state holds it),
            // whatever specialization the session has compiled since: no key check, no lock.
            runner_.run(runtime_inputs_of(ordered), outs, controls).throw_if_error();
            return outs;
        }
        std::string key = specialization_key(dims, frozen);
        // Concurrent runs of one specialization share its executable. A run holds
        // specialization_mu_ shared from its key check to its end; a new specialization compiles
        // holding it exclusively, so no run starts on another specialization's executable.
        std::shared_lock<std::shared_mutex> running(specialization_mu_);
        while (!compiled_ || key != key_) {
            running.unlock();
            {
                std::unique_lock<std::shared_mutex> switching(specialization_mu_);
                std::lock_guard<std::mutex> lock(compile_mu_);
                if (!compiled_ || key != key_) {
                    ir::Graph g = frontend::import_onnx_file(path_);
                    specialize(std::move(g), dims, frozen);
                    key_ = key;
                }
            }
            running.lock();
        }
        Status st = runner_.run(runtime_inputs_of(ordered), outs, controls);
        st.throw_if_error();
        return outs;
    }

    /// Frozen inputs are constants of the executable: the runtime inputs are the others.
    std::vector<Tensor> runtime_inputs_of(const std::vector<Tensor>& ordered) const {
        std::vector<Tensor> runtime_inputs;
        for (size_t i = 0; i < inputs_.size(); ++i)
            if (!value_inputs_.count(inputs_[i].name)) runtime_inputs.push_back(ordered[i]);
        return runtime_inputs;
    }

    std::string inspect() override {
        if (interpreter_) {
            ir::PrintOptions popts;
            popts.max_constant_elements = 16;
            return "// runs in the graph interpreter: " + stats_.interpreter_reason + "\n" +
                   ir::print_graph(*interp_graph_, popts);
        }
        std::unique_lock<std::shared_mutex> switching(specialization_mu_);
        std::lock_guard<std::mutex> lock(compile_mu_);
        if (!compiled_) {
            KILN_CHECK(value_inputs_.empty(), kUnsupported)
                << "cannot inspect before a run: graph input '" << *value_inputs_.begin()
                << "' determines a shape; kernels are compiled when its value is known";
            specialize(frontend::import_onnx_file(path_), opts_.dims, {});
        }
        return inspect_text_;
    }

    SessionStats stats() const override { return stats_; }

    std::string kernel_list() override {
        if (interpreter_) return "0 kernels (the model runs in the graph interpreter: " + stats_.interpreter_reason + ")\n";
        (void)inspect();  // compiles first if the model has not been compiled yet
        return kernel_list_;
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

    static std::string specialization_key(const std::map<std::string, int64_t>& dims, const std::map<std::string, Tensor>& frozen) {
        std::ostringstream os;
        for (const auto& [k, v] : dims) os << k << "=" << v << ";";
        for (const auto& [k, t] : frozen) os << k << ":" << tensor_key(t) << ";";
        return os.str();
    }

    void specialize(ir::Graph g, const std::map<std::string, int64_t>& dims, const std::map<std::string, Tensor>& frozen) {
        for (const auto& [name, t] : frozen) g.freeze_input(g.find_value(name), t.clone());
        SessionOptions specialized = opts_;
        specialized.dims = dims;
        compiler::CompileOptions copts = compiler::compile_options_for(specialized, runner_.stats().intra_op_threads);
        copts.plan_for_concurrency = runner_.plans_for_concurrency();
        std::ostringstream after;
        ir::PrintOptions popts;
        popts.max_constant_elements = 16;
        copts.passes.print = [&](const std::string& name, const ir::Graph& graph) {
            after << "// IR after pass " << name << "\n" << ir::print_graph(graph, popts) << "\n";
        };
        compiler::CompiledModel m = compiler::compile(g, copts);
        memory_report_ = m.memory.report;
        runner_.set_executable(m.executable);
        const runtime::RunnerStats rs = runner_.stats();
        stats_.executor = rs.executor;
        stats_.inter_op_threads = rs.inter_op_threads;
        stats_.parallel_width = rs.parallel_width;
        stats_.kernels = m.stats.kernels;
        stats_.compiled = m.stats.compiled;
        stats_.compile_seconds = m.stats.seconds;
        std::ostringstream os;
        os << after.str();
        os << "// IR after the -O" << opts_.opt_level << " pipeline\n" << ir::print_graph(g, popts) << "\n";
        std::istringstream table(pass::pass_records_str(m.pass_records));
        os << "// passes (nodes before -> after, time)\n";
        for (std::string line; std::getline(table, line);) os << "//   " << line << "\n";
        os << "\n// " << m.kernels.size() << " kernel launches, " << m.stats.kernels << " distinct kernels\n";
        std::ostringstream list;
        for (size_t i = 0; i < m.kernels.size(); ++i) {
            list << "kernel " << i << ": " << m.kernels[i].description;
            if (!m.kernels[i].node_name.empty()) list << " (node '" << m.kernels[i].node_name << "')";
            if (!m.kernels[i].extern_name.empty()) list << " [" << m.kernels[i].extern_name << "]";
            list << "\n";
        }
        list << m.kernels.size() << " kernels\n";
        kernel_list_ = list.str();
        for (size_t i = 0; i < m.kernels.size(); ++i) {
            const compiler::KernelInfo& k = m.kernels[i];
            os << "\n// ---- kernel " << i << ": " << k.description;
            if (!k.node_name.empty()) os << " (node '" << k.node_name << "')";
            os << (k.from_cache ? " [cached]" : " [compiled]") << "\n// loop IR:\n";
            std::istringstream tir(k.tir);
            for (std::string line; std::getline(tir, line);) os << "//   " << line << "\n";
            os << k.c_source << "\n";
        }
        inspect_text_ = os.str();
        compiled_ = true;
    }

public:
    std::string memory_report() override {
        if (interpreter_) return "no static memory plan: the model runs in the graph interpreter\n";
        (void)inspect();  // compiles first if the model has not been compiled yet
        return memory_report_ + runner_.allocator_report();
    }

    std::string profile_summary(int top) const override { return runner_.profile_summary(top); }

    void write_profile() const override { runner_.write_profile(); }

private:
    std::string path_;
    SessionOptions opts_;
    runtime::ModelRunner runner_;
    std::shared_mutex specialization_mu_;  // shared: a run; exclusive: changing the executable
    std::mutex compile_mu_;      // guards compiled_, key_ and the texts made by specialize()
    std::mutex interpreter_mu_;
    std::string memory_report_;
    std::vector<TensorInfo> inputs_, outputs_;
    std::set<std::string> value_inputs_;
    std::shared_ptr<const ir::Graph> interp_graph_;
    std::unique_ptr<compiler::GraphInterpreter> interpreter_;
    bool compiled_ = false;
    std::string key_;
    std::string inspect_text_;
    std::string kernel_list_;
    SessionStats stats_;
};

}  // namespace

std::unique_ptr<Session> Session::load(const std::string& path, const SessionOptions& opts) {
    if (runtime::is_artifact_file(path)) return runtime::load_artifact_session(path, opts);
    return std::make_unique<SessionImpl>(path, opts);
}

}  // namespace kiln
