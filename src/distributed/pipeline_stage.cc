// PipelineStage (pipeline_stage.h).
#include "distributed/pipeline_stage.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <initializer_list>

#include "autodiff/optimizer.h"
#include "autodiff/training_graph.h"
#include "compiler/compile.h"
#include "compiler/graph_interpreter.h"
#include "compiler/model_compile_options.h"
#include "compiler/optimizer_spec.h"
#include "frontend/onnx/importer.h"
#include "pass/infer_shapes.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The stage's optimizer spec: the clip factor is an input (the norm spans the stages, and
/// PipelineParallel computes the factor).
autodiff::OptimizerSpec stage_optimizer(const OptimizerOptions& o) {
    autodiff::OptimizerSpec optimizer = compiler::optimizer_spec(o);
    optimizer.clip_from_input = true;
    autodiff::check_optimizer_options(optimizer);
    return optimizer;
}

}  // namespace

autodiff::TrainingGraph stage_apply_graph(const PipelineTrainingSpec& spec, const std::vector<std::string>& params,
                                          const OptimizerOptions& optimizer) {
    ir::Graph model = frontend::import_onnx_file(spec.onnx_path);
    compiler::bind_input_shapes(model, spec.dims);
    pass::infer_shapes(model, compiler::pass_context());
    autodiff::ModelState state;
    state.params = params;
    return autodiff::build_training_graph(std::move(model), state, spec.loss, stage_optimizer(optimizer),
                                          autodiff::TrainingGraphKind::kApply);
}

struct PipelineStage::Compiled {
    std::shared_ptr<runtime::PreparedExecutable> prepared;
};

void accumulate(Tensor& sum, Tensor t) {
    if (!sum.defined()) {
        sum = std::move(t);
        return;
    }
    KILN_CHECK(sum.dtype() == t.dtype() && sum.shape() == t.shape(), kInternal)
        << "bug in Kiln: accumulating " << shape_str(t.shape()) << " into " << shape_str(sum.shape());
    if (sum.dtype() == DType::kFloat32) {
        float* s = sum.data_as<float>();
        const float* x = t.data_as<float>();
        for (int64_t i = 0; i < sum.numel(); ++i) s[i] += x[i];
        return;
    }
    for (int64_t i = 0; i < sum.numel(); ++i) sum.set_f64(i, sum.get_f64(i) + t.get_f64(i));
}

PipelineStage::PipelineStage(PipelineStageGraph graph, autodiff::TrainingGraph apply, const TrainingOptions& opts,
                             const std::map<std::string, Tensor>& initial)
    : g_(std::move(graph)), opts_(opts),
      runner_(std::make_unique<runtime::ModelRunner>(runtime::runner_options(opts.session))) {
    const autodiff::OptimizerSpec optimizer = stage_optimizer(opts.optimizer);
    for (const std::string& p : g_.params) {
        params_[p] = initial.at(p).clone();
        for (const std::string& slot : autodiff::optimizer_state_slots(optimizer))
            state_[autodiff::optimizer_state_name(p, slot)] = Tensor(params_[p].dtype(), params_[p].shape());  // zeros
    }
    if (!g_.computes_loss) forward_ = compile(g_.forward);
    backward_ = compile(g_.backward);
    if (!g_.params.empty()) {
        apply_outputs_ = apply.outputs;
        apply_ = compile(apply.graph);
    }
}

PipelineStage::~PipelineStage() = default;

std::unique_ptr<PipelineStage::Compiled> PipelineStage::compile(ir::Graph& g) {
    const std::string why = compiler::host_only_reason(g);
    KILN_CHECK(why.empty(), kUnsupported) << "pipeline-parallel training compiles every stage, and stage " << g_.rank
                                          << "'s graph '" << g.name << "' does not compile: " << why;
    compiler::CompileOptions copts = compiler::compile_options_for(opts_.session, runner_->stats().intra_op_threads);
    copts.plan_for_concurrency = runner_->plans_for_concurrency();
    auto c = std::make_unique<Compiled>();
    c->prepared = runner_->prepare(compiler::compile(g, copts).executable);
    return c;
}

std::vector<Tensor> PipelineStage::run(Compiled& c, const Values& feeds, const Values& extra,
                                       const runtime::RunControls& controls) {
    const runtime::Executable& exe = *c.prepared->exe;
    std::vector<Tensor> inputs;
    for (int id : exe.inputs) {
        const std::string& name = exe.buffers[static_cast<size_t>(id)].name;
        const Tensor* t = nullptr;
        for (const Values* from : std::initializer_list<const Values*>{&feeds, &extra, &params_, &state_}) {
            auto it = from->find(name);
            if (it != from->end()) {
                t = &it->second;
                break;
            }
        }
        KILN_CHECK(t, kInvalidArgument) << "pipeline stage " << g_.rank << ": no value for input '" << name << "'";
        inputs.push_back(*t);
    }
    std::vector<Tensor> outputs;
    runner_->run(*c.prepared, inputs, outputs, controls).throw_if_error();
    return outputs;
}

std::vector<Tensor> PipelineStage::forward(const Values& feeds) {
    KILN_CHECK(forward_, kInternal) << "bug in Kiln: the loss stage has no forward graph of its own";
    const auto t0 = Clock::now();
    std::vector<Tensor> out = run(*forward_, feeds, {});
    forward_s += since(t0);
    return out;
}

PipelineStage::Values PipelineStage::backward(const Values& feeds, double* loss, const GradientReady* on_sum) {
    const auto t0 = Clock::now();
    // Per backward output: its kind ("grad", "input_grad", "loss") and name.
    auto role = [&](size_t i) { return autodiff::split_role_key(g_.backward_outputs[i]); };
    std::vector<char> summed(g_.backward_outputs.size(), 0);  // per output: added by the callback
    std::exception_ptr error;
    std::mutex error_mu;
    runtime::OutputReadyFn ready = [&](size_t i, const Tensor& value) {
        if (i >= summed.size()) return;
        auto [kind, name] = role(i);
        if (kind != "grad") return;
        try {
            Tensor& sum = grads_.at(name);  // no insertion here: the map is not changed concurrently
            accumulate(sum, value);
            summed[i] = 1;
            (*on_sum)(name, sum);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (!error) error = std::current_exception();
        }
    };
    runtime::RunControls controls;
    if (on_sum) {
        for (const std::string& p : g_.params) grads_[p];  // every key exists before the run
        controls.on_output_ready = &ready;
    }
    std::vector<Tensor> out = run(*backward_, feeds, {}, controls);
    if (error) std::rethrow_exception(error);
    KILN_CHECK(out.size() == g_.backward_outputs.size(), kInternal)
        << "bug in Kiln: the backward graph has " << out.size() << " outputs, expected " << g_.backward_outputs.size();
    Values input_grads;
    for (size_t i = 0; i < out.size(); ++i) {
        auto [kind, name] = role(i);
        if (kind == "loss" && loss) *loss = out[i].get_f64(0);
        else if (kind == "grad" && !summed[i]) {
            accumulate(grads_[name], std::move(out[i]));
            if (on_sum) (*on_sum)(name, grads_[name]);
        } else if (kind == "input_grad") input_grads[name] = std::move(out[i]);
    }
    std::erase_if(grads_, [](const auto& kv) { return !kv.second.defined(); });  // keys made for the callback
    backward_s += since(t0);
    return input_grads;
}

std::vector<Tensor> PipelineStage::evaluate(const Values& feeds) {
    if (!eval_) eval_ = compile(g_.eval);
    return run(*eval_, feeds, {});
}

double PipelineStage::gradient_square_sum() const {
    double sum = 0;
    for (const auto& [name, g] : grads_) {
        if (g.dtype() == DType::kFloat32) {
            // The common case: no dtype switch per element, and 8 partial sums, so that the adds
            // are not one chain of dependent additions (the compiler may not reorder them itself).
            const float* x = g.data_as<float>();
            const int64_t n = g.numel(), blocks = n / 8 * 8;
            double part[8] = {};
            for (int64_t i = 0; i < blocks; i += 8)
                for (int k = 0; k < 8; ++k) part[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
            for (int64_t i = blocks; i < n; ++i) part[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
            for (double p : part) sum += p;
            continue;
        }
        for (int64_t i = 0; i < g.numel(); ++i) sum += g.get_f64(i) * g.get_f64(i);
    }
    return sum;
}

void PipelineStage::apply(int64_t step, double lr, double clip_factor) {
    if (!apply_) return;  // a stage without parameters
    const auto t0 = Clock::now();
    const autodiff::OptimizerSpec spec = compiler::optimizer_spec(opts_.optimizer);
    Values extra;
    const std::vector<std::string> names = autodiff::optimizer_scalar_names(spec);
    const std::vector<double> values = autodiff::optimizer_scalar_values(spec, step, lr);
    for (size_t i = 0; i < names.size(); ++i) {
        Tensor s(DType::kFloat32, {});
        s.set_f64(0, values[i]);
        extra[names[i]] = std::move(s);
    }
    if (spec.clip_norm > 0) {
        Tensor f(DType::kFloat32, {});
        f.set_f64(0, clip_factor);
        extra[autodiff::kClipFactorInput] = std::move(f);
    }
    for (auto& [name, g] : grads_) extra[autodiff::gradient_input_name(name)] = std::move(g);
    std::vector<Tensor> out = run(*apply_, {}, extra);
    for (size_t i = 0; i < out.size(); ++i) {
        const auto [role, name] = autodiff::split_role_key(apply_outputs_.at(i));
        (role == "param" ? params_ : state_)[name] = std::move(out[i]);
    }
    grads_.clear();
    apply_s += since(t0);
}

void PipelineStage::load_state(const Values& params, const Values& state) {
    auto check = [&](const char* what, const Values& have, const Values& got) {
        KILN_CHECK(got.size() == have.size(), kInvalidArgument)
            << "pipeline stage " << g_.rank << ": " << got.size() << " " << what << " tensors given, the stage has "
            << have.size();
        for (const auto& [name, t] : have) {
            auto it = got.find(name);
            KILN_CHECK(it != got.end(), kInvalidArgument)
                << "pipeline stage " << g_.rank << ": no " << what << " '" << name << "' given";
            KILN_CHECK(it->second.dtype() == t.dtype() && it->second.shape() == t.shape(), kInvalidArgument)
                << "pipeline stage " << g_.rank << ": " << what << " '" << name << "' is "
                << dtype_name(it->second.dtype()) << shape_str(it->second.shape()) << ", expected "
                << dtype_name(t.dtype()) << shape_str(t.shape());
        }
    };
    check("parameter", params_, params);
    check("optimizer state", state_, state);
    for (const auto& [name, t] : params) params_[name] = t.clone();
    for (const auto& [name, t] : state) state_[name] = t.clone();
}

const Tensor& PipelineStage::parameter(const std::string& name) const {
    auto it = params_.find(name);
    KILN_CHECK(it != params_.end(), kInvalidArgument)
        << "'" << name << "' is not a parameter of pipeline stage " << g_.rank;
    return it->second;
}

}  // namespace kiln::distributed
