// kiln::TrainingSession: the training graphs of a model (autodiff/training_graph.h), compiled,
// run with one ModelRunner, the parameters and state kept between steps.
//
// The train step compiles in create(); the eval, gradients and apply graphs compile on first
// use. A graph compile() does not take (a model with If/Loop/Scan) runs in the graph
// interpreter instead. Their executables share one runner (one set of thread pools): the runner switches
// executables when a call needs another graph. Every graph input is named, and the session
// feeds it by name from the batch, the parameters, the running statistics, the optimizer state
// or the step's scalars; the step's outputs replace the stored values, no copy. The train and
// apply steps write the new parameters, optimizer state and running statistics over the old ones
// where the compiler finds that exact (buffer donation, compiler/donation.h): the session gives
// those inputs up, so a step holds one copy of them, not two. A step that fails part-way may
// then leave some of them updated (as PyTorch's in-place optimizers do); every check that can
// fail on a user's input (shapes, index ranges) runs before the first update.
#include <cmath>
#include <memory>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "autodiff/recompute.h"
#include "autodiff/training_graph.h"
#include "compiler/compile.h"
#include "compiler/graph_interpreter.h"
#include "compiler/model_compile_options.h"
#include "compiler/optimizer_spec.h"
#include "compiler/training_checkpoint.h"
#include "compiler/training_graph_source.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_initializers.h"
#include "kiln/training.h"
#include "pass/infer_shapes.h"
#include "runtime/model_runner.h"

namespace kiln {
namespace {

using autodiff::TrainingGraphKind;

constexpr int kKinds = 4;

Tensor f32_scalar(double v) {
    Tensor t(DType::kFloat32, {});
    t.set_f64(0, v);
    return t;
}

void check_like(const std::string& what, const Tensor& t, DType dtype, const Shape& shape) {
    KILN_CHECK(t.dtype() == dtype, kInvalidArgument)
        << what << ": expected dtype " << dtype_name(dtype) << ", got " << dtype_name(t.dtype());
    KILN_CHECK(t.shape() == shape, kInvalidArgument)
        << what << ": expected shape " << shape_str(shape) << ", got " << shape_str(t.shape());
}

/// One compiled training graph: its executable (or, for a model with control flow, its
/// interpreter) and what its inputs and outputs are.
struct CompiledGraph {
    std::shared_ptr<runtime::Executable> exe;
    std::unique_ptr<compiler::GraphInterpreter> interp;
    std::vector<std::string> inputs;   // graph input names, in executable order
    std::vector<std::string> outputs;  // role keys (TrainingGraph::outputs)
    /// (output, input) positions whose output the run writes over the input (donation).
    std::vector<std::pair<int, int>> donations;
    compiler::MemoryFigures memory;
};

/// The step's donation offers: each new parameter, optimizer state or running statistic over the
/// input of the same name.
std::vector<std::pair<int, int>> donation_offers(const autodiff::TrainingGraph& tg) {
    std::vector<std::pair<int, int>> offers;
    const std::vector<ir::Value*>& inputs = tg.graph.inputs();
    for (size_t j = 0; j < tg.outputs.size(); ++j) {
        const auto [role, name] = autodiff::split_role_key(tg.outputs[j]);
        if (role != "param" && role != "state" && role != "stat") continue;
        for (size_t i = 0; i < inputs.size(); ++i)
            if (inputs[i]->name() == name) offers.emplace_back(static_cast<int>(j), static_cast<int>(i));
    }
    return offers;
}

class TrainingSessionImpl final : public TrainingSession, public compiler::TrainingGraphSource {
public:
    TrainingSessionImpl(std::string path, const TrainingOptions& opts)
        : path_(std::move(path)), opts_(opts), spec_(compiler::optimizer_spec(opts.optimizer)),
          runner_(runtime::runner_options(opts.session)) {
        loss_.kind = opts.loss.kind;
        loss_.output = opts.loss.output;
        loss_.labels = opts.loss.labels;
        check_options();
        ir::Graph g = bound_model();
        autodiff::check_loss(g, loss_);
        state_ = autodiff::find_model_state(g, frontend::onnx_initializer_names(path_), opts.trainable);
        for (ir::Value* in : g.inputs()) batch_inputs_.push_back(info_of(*in));
        if (loss_.kind != "output") {
            // The labels input as the graph builder types it (dtype, static shape).
            autodiff::TrainingGraph eval =
                autodiff::build_training_graph(bound_model(), state_, loss_, spec_, TrainingGraphKind::kEval);
            batch_inputs_.push_back(info_of(*eval.graph.find_value(loss_.labels)));
        }
        // Copies the steps may write over (donation), never the model's constants themselves.
        for (const std::string& name : state_.params) params_[name] = g.find_value(name)->constant().clone();
        for (const std::string& name : state_.stats) stats_[name] = g.find_value(name)->constant().clone();
        for (const std::string& name : state_.params)
            for (const std::string& slot : autodiff::optimizer_state_slots(spec_)) {
                const Tensor& p = params_.at(name);
                opt_state_[autodiff::optimizer_state_name(name, slot)] = Tensor(p.dtype(), p.shape());  // zeros
            }
        if (opts_.split_step) {
            (void)compiled(TrainingGraphKind::kGradients);
            (void)compiled(TrainingGraphKind::kApply);
        } else {
            (void)compiled(TrainingGraphKind::kTrainStep);
        }
    }

    const std::vector<TensorInfo>& batch_inputs() const override { return batch_inputs_; }

    StepResult train_step(const std::map<std::string, Tensor>& batch) override {
        StepResult r = run_graph(TrainingGraphKind::kTrainStep, &batch, nullptr, nullptr);
        ++step_;
        return r;
    }

    StepResult eval_step(const std::map<std::string, Tensor>& batch) override {
        return run_graph(TrainingGraphKind::kEval, &batch, nullptr, nullptr);
    }

    std::map<std::string, Tensor> gradients(const std::map<std::string, Tensor>& batch, double* loss) override {
        std::map<std::string, Tensor> grads;
        StepResult r = run_graph(TrainingGraphKind::kGradients, &batch, nullptr, &grads);
        if (loss) *loss = r.loss;
        return grads;
    }

    std::map<std::string, Tensor> gradients_as_ready(const std::map<std::string, Tensor>& batch, double* loss,
                                                     const GradientReadyFn& ready) override {
        std::map<std::string, Tensor> grads;
        StepResult r = run_graph(TrainingGraphKind::kGradients, &batch, nullptr, &grads, &ready);
        if (loss) *loss = r.loss;
        return grads;
    }

    void apply_gradients(const std::map<std::string, Tensor>& grads) override {
        for (const auto& [name, t] : grads) {
            auto it = params_.find(name);
            KILN_CHECK(it != params_.end(), kInvalidArgument) << "apply_gradients: '" << name << "' is not a trained parameter";
            check_like("apply_gradients: gradient of '" + name + "'", t, it->second.dtype(), it->second.shape());
        }
        for (const std::string& name : state_.params)
            KILN_CHECK(grads.count(name), kInvalidArgument) << "apply_gradients: no gradient for parameter '" << name << "'";
        run_graph(TrainingGraphKind::kApply, nullptr, &grads, nullptr);
        ++step_;
    }

    int64_t step() const override { return step_; }
    std::vector<std::string> parameter_names() const override { return state_.params; }

    Tensor parameter(const std::string& name) const override {
        auto it = params_.find(name);
        KILN_CHECK(it != params_.end(), kInvalidArgument) << "'" << name << "' is not a trained parameter";
        return it->second.clone();
    }

    void set_parameter(const std::string& name, const Tensor& value) override {
        auto it = params_.find(name);
        KILN_CHECK(it != params_.end(), kInvalidArgument) << "set_parameter: '" << name << "' is not a trained parameter";
        check_like("set_parameter '" + name + "'", value, it->second.dtype(), it->second.shape());
        it->second = value.clone();
    }

    void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra) const override {
        compiler::Checkpoint c;
        c.step = step_;
        c.extra = extra;
        for (const auto& [name, t] : params_) c.tensors["param:" + name] = t;
        for (const auto& [name, t] : stats_) c.tensors["stat:" + name] = t;
        for (const auto& [name, t] : opt_state_) c.tensors["state:" + name] = t;
        compiler::write_checkpoint(path, c);
    }

    std::map<std::string, std::string> load_checkpoint(const std::string& path) override {
        compiler::Checkpoint c = compiler::read_checkpoint(path);
        std::map<std::string, Tensor> params, stats, state;
        const std::pair<const char*, std::map<std::string, Tensor>*> groups[] = {
            {"param:", &params}, {"stat:", &stats}, {"state:", &state}};
        for (auto& [name, t] : c.tensors) {
            bool known = false;
            for (const auto& [prefix, into] : groups) {
                const std::string p = prefix;
                if (name.compare(0, p.size(), p) == 0) {
                    (*into)[name.substr(p.size())] = std::move(t);
                    known = true;
                }
            }
            KILN_CHECK(known, kInvalidArgument) << "checkpoint '" << path << "': unknown tensor '" << name << "'";
        }
        match(path, "parameter", params_, params);
        match(path, "running statistic", stats_, stats);
        match(path, "optimizer state", opt_state_, state);
        params_ = std::move(params);
        stats_ = std::move(stats);
        opt_state_ = std::move(state);
        step_ = c.step;
        return c.extra;
    }

    void export_onnx(const std::string& path) const override {
        std::map<std::string, Tensor> values = params_;
        values.insert(stats_.begin(), stats_.end());
        compiler::write_file_atomically(path, frontend::onnx_with_initializers(path_, values));
    }

    void set_learning_rate(double lr) override {
        KILN_CHECK(lr >= 0 && std::isfinite(lr), kInvalidArgument) << "learning rate must be >= 0, got " << lr;
        lr_override_ = lr;
    }
    double learning_rate() const override {
        return lr_override_ >= 0 ? lr_override_ : opts_.schedule.at(step_, opts_.optimizer.lr);
    }

    std::string memory_report() override {
        return compiled(TrainingGraphKind::kTrainStep).memory.report + runner_.allocator_report();
    }

    size_t planned_peak_bytes() override { return compiled(TrainingGraphKind::kTrainStep).memory.arena; }

    autodiff::TrainingGraph build_graph(TrainingGraphKind kind, autodiff::BatchNormStatistics bn_stats) const override {
        return autodiff::build_training_graph(bound_model(), state_, loss_, spec_, kind, opts_.seed, bn_stats);
    }
    const TrainingOptions& training_options() const override { return opts_; }
    std::map<std::string, Tensor>& running_statistics() override { return stats_; }

private:
    void check_options() const {
        autodiff::check_optimizer_options(spec_);
        const OptimizerOptions& o = opts_.optimizer;
        KILN_CHECK(o.lr >= 0 && std::isfinite(o.lr), kInvalidArgument) << "optimizer lr must be >= 0, got " << o.lr;
        (void)opts_.schedule.at(0, o.lr);  // validates the schedule's kind and values
        const autodiff::RecomputeMode mode = autodiff::parse_recompute_mode(opts_.recompute);
        KILN_CHECK(mode != autodiff::RecomputeMode::kAuto || opts_.recompute_memory_limit > 0, kInvalidArgument)
            << "recompute 'auto' needs recompute_memory_limit (kiln train --memory-limit)";
    }

    /// The model imported with its dims bound and types inferred.
    ir::Graph bound_model() const {
        ir::Graph g = frontend::import_onnx_file(path_);
        compiler::bind_input_shapes(g, opts_.session.dims);
        pass::infer_shapes(g, compiler::pass_context());
        return g;
    }

    static TensorInfo info_of(const ir::Value& v) {
        TensorInfo t;
        t.name = v.name();
        t.dtype = v.type().dtype;
        t.kind = static_cast<ValueKind>(v.type().kind);
        for (const ir::Dim& d : v.type().shape) {
            t.shape.push_back(d.is_static() ? d.value : -1);
            t.symbols.push_back(d.is_static() ? "" : d.symbol);
        }
        return t;
    }

    /// Checkpoint group `got` against the session's `have`: same names, dtypes and shapes.
    static void match(const std::string& path, const char* what, const std::map<std::string, Tensor>& have,
                      const std::map<std::string, Tensor>& got) {
        for (const auto& [name, t] : have) {
            auto it = got.find(name);
            KILN_CHECK(it != got.end(), kInvalidArgument)
                << "checkpoint '" << path << "' has no " << what << " '" << name
                << "' (written for another model, trainable set or optimizer?)";
            check_like("checkpoint '" + path + "': " + what + " '" + name + "'", it->second, t.dtype(), t.shape());
        }
        for (const auto& [name, t] : got)
            KILN_CHECK(have.count(name), kInvalidArgument)
                << "checkpoint '" << path << "' holds " << what << " '" << name << "' that this session does not have";
    }

    CompiledGraph& compiled(TrainingGraphKind kind) {
        std::unique_ptr<CompiledGraph>& slot = graphs_[static_cast<int>(kind)];
        if (slot) return *slot;
        autodiff::TrainingGraph tg = autodiff::build_training_graph(bound_model(), state_, loss_, spec_, kind, opts_.seed);
        if (std::string why = compiler::host_only_reason(tg.graph); !why.empty()) return interpreted(slot, tg, why);
        std::string recompute_line;
        if (kind == TrainingGraphKind::kTrainStep || kind == TrainingGraphKind::kGradients) {
            // Activation checkpointing (autodiff/recompute.h) of the forward pass the backward reads.
            autodiff::RecomputeOptions ro;
            ro.mode = autodiff::parse_recompute_mode(opts_.recompute);
            ro.memory_limit = opts_.recompute_memory_limit;
            recompute_line = autodiff::recompute(tg.graph, ro).str() + "\n";
        }
        compiler::CompileOptions copts =
            compiler::compile_options_for(opts_.session, runner_.stats().intra_op_threads);
        copts.plan_for_concurrency = runner_.plans_for_concurrency();
        if (kind == TrainingGraphKind::kTrainStep || kind == TrainingGraphKind::kApply) copts.donate = donation_offers(tg);
        compiler::CompiledModel m = compiler::compile(tg.graph, copts);
        auto c = std::make_unique<CompiledGraph>();
        c->exe = m.executable;
        for (ir::Value* in : tg.graph.inputs()) c->inputs.push_back(in->name());
        c->outputs = tg.outputs;
        c->donations = m.executable->donations;
        c->memory = m.memory;
        c->memory.report = recompute_line + c->memory.report;
        KILN_CHECK(c->exe->inputs.size() == c->inputs.size() && c->exe->outputs.size() == c->outputs.size(), kInternal)
            << "bug in Kiln: the compiled training graph has " << c->exe->inputs.size() << " inputs / "
            << c->exe->outputs.size() << " outputs, the graph " << c->inputs.size() << " / " << c->outputs.size();
        slot = std::move(c);
        return *slot;
    }

    /// A training graph compile() does not take (If/Loop/Scan regions, host-only ops) runs in the
    /// graph interpreter: no memory plan, no recomputation (docs/training.md).
    CompiledGraph& interpreted(std::unique_ptr<CompiledGraph>& slot, autodiff::TrainingGraph& tg, const std::string& why) {
        KILN_CHECK(autodiff::parse_recompute_mode(opts_.recompute) == autodiff::RecomputeMode::kNone, kUnsupported)
            << "recompute '" << opts_.recompute << "' needs a compiled training graph, and this one runs in the graph "
            << "interpreter: " << why;
        auto c = std::make_unique<CompiledGraph>();
        for (ir::Value* in : tg.graph.inputs()) c->inputs.push_back(in->name());
        c->outputs = tg.outputs;
        c->memory.report = "interpreted (" + why + "): no memory plan\n";
        c->interp = std::make_unique<compiler::GraphInterpreter>(std::make_shared<const ir::Graph>(std::move(tg.graph)),
                                                                 runner_.intra_pool(), runner_.allocator());
        slot = std::move(c);
        return *slot;
    }

    void check_batch(const std::map<std::string, Tensor>& batch, bool with_labels) const {
        for (const TensorInfo& info : batch_inputs_) {
            if (!with_labels && loss_.kind != "output" && info.name == loss_.labels) continue;
            auto it = batch.find(info.name);
            KILN_CHECK(it != batch.end(), kInvalidArgument) << "batch has no input '" << info.name << "'";
            check_like("batch input '" + info.name + "'", it->second, info.dtype, Shape(info.shape.begin(), info.shape.end()));
        }
        for (const auto& [name, t] : batch) {
            bool known = false;
            for (const TensorInfo& info : batch_inputs_) known = known || info.name == name;
            KILN_CHECK(known, kInvalidArgument) << "batch input '" << name << "' is not an input of the training step";
        }
    }

    StepResult run_graph(TrainingGraphKind kind, const std::map<std::string, Tensor>* batch,
                         const std::map<std::string, Tensor>* grads, std::map<std::string, Tensor>* grads_out,
                         const GradientReadyFn* grad_ready = nullptr) {
        if (batch) check_batch(*batch, true);
        CompiledGraph& c = compiled(kind);
        std::map<std::string, Tensor> scalars;
        if (kind == TrainingGraphKind::kTrainStep || kind == TrainingGraphKind::kApply) {
            const double lr = learning_rate();
            const std::vector<std::string> names = autodiff::optimizer_scalar_names(spec_);
            const std::vector<double> values = autodiff::optimizer_scalar_values(spec_, step_, lr);
            for (size_t i = 0; i < names.size(); ++i) scalars[names[i]] = f32_scalar(values[i]);
        }
        std::vector<Tensor> inputs;
        for (const std::string& name : c.inputs) {
            const Tensor* t = nullptr;
            using Values = const std::map<std::string, Tensor>*;
            for (Values from : std::initializer_list<Values>{batch, &params_, &stats_, &opt_state_, &scalars}) {
                if (!from) continue;
                auto it = from->find(name);
                if (it != from->end()) {
                    t = &it->second;
                    break;
                }
            }
            if (!t && grads && name.compare(0, 5, "grad/") == 0) {
                auto it = grads->find(name.substr(5));
                if (it != grads->end()) t = &it->second;
            }
            KILN_CHECK(t, kInternal) << "bug in Kiln: no value for training graph input '" << name << "'";
            inputs.push_back(*t);
        }
        std::vector<Tensor> outs;
        // Gradient outputs are reported as the runtime finishes each (runtime/output_ready.h).
        const runtime::OutputReadyFn on_output = [&](size_t j, const Tensor& value) {
            if (c.outputs[j].compare(0, 5, "grad:") == 0) (*grad_ready)(c.outputs[j].substr(5), value);
        };
        if (c.interp) {
            for (const Datum& d : c.interp->run(std::vector<Datum>(inputs.begin(), inputs.end())))
                outs.push_back(d.tensor("training graph output"));
            if (grad_ready)
                for (size_t j = 0; j < outs.size(); ++j) on_output(j, outs[j]);
        } else {
            if (runner_exe_ != c.exe) {
                runner_.set_executable(c.exe);
                runner_exe_ = c.exe;
            }
            runtime::RunControls controls;
            if (grad_ready) controls.on_output_ready = &on_output;
            // Donated inputs: the output is written over the stored tensor the input shares.
            std::vector<const Tensor*> into;
            if (!c.donations.empty()) {
                into.assign(c.outputs.size(), nullptr);
                for (const auto& [o, i] : c.donations) into[static_cast<size_t>(o)] = &inputs[static_cast<size_t>(i)];
                controls.outputs_into = &into;
            }
            runner_.run(inputs, outs, controls).throw_if_error();
        }
        StepResult r;
        for (size_t i = 0; i < c.outputs.size(); ++i) {
            const auto [role, name] = autodiff::split_role_key(c.outputs[i]);
            if (role == "loss") r.loss = outs[i].get_f64(0);
            else if (role == "output") r.outputs.push_back(std::move(outs[i]));
            else if (role == "param") params_[name] = std::move(outs[i]);
            else if (role == "state") opt_state_[name] = std::move(outs[i]);
            else if (role == "stat") stats_[name] = std::move(outs[i]);
            else if (role == "grad" && grads_out) (*grads_out)[name] = std::move(outs[i]);
        }
        return r;
    }

    std::string path_;
    TrainingOptions opts_;
    autodiff::OptimizerSpec spec_;
    autodiff::LossSpec loss_;
    runtime::ModelRunner runner_;
    std::shared_ptr<runtime::Executable> runner_exe_;
    autodiff::ModelState state_;
    std::vector<TensorInfo> batch_inputs_;
    std::map<std::string, Tensor> params_, stats_, opt_state_;
    std::unique_ptr<CompiledGraph> graphs_[kKinds];
    int64_t step_ = 0;
    double lr_override_ = -1;  // set_learning_rate (the Python Optimizer), else the schedule
};

}  // namespace

compiler::TrainingGraphSource* compiler::training_graph_source(TrainingSession& s) {
    return dynamic_cast<TrainingSessionImpl*>(&s);
}

std::unique_ptr<TrainingSession> TrainingSession::create(const std::string& onnx_path, const TrainingOptions& opts) {
    return std::make_unique<TrainingSessionImpl>(onnx_path, opts);
}

}  // namespace kiln
