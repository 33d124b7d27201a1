// make_pipeline_plan (pipeline_plan.h).
#include "distributed/pipeline_plan.h"

#include <algorithm>
#include <sstream>

#include "compiler/compile.h"
#include "distributed/pipeline_checkpoint.h"
#include "distributed/pipeline_stage.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_initializers.h"
#include "pass/infer_shapes.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

autodiff::LossSpec loss_spec(const LossOptions& o) { return {o.kind, o.output, o.labels}; }

/// The dims of a microbatch (the batch dim, dim 0 of the model's first input, divided by M);
/// `batched` gets the inputs whose leading dim is the batch dim, and the labels.
std::map<std::string, int64_t> microbatch_dims(const std::string& path, const TrainingOptions& opts, int microbatches,
                                               std::set<std::string>& batched) {
    const std::map<std::string, int64_t>& dims = opts.session.dims;
    ir::Graph g = frontend::import_onnx_file(path);
    KILN_CHECK(!g.inputs().empty() && g.inputs()[0]->type().rank() > 0, kInvalidArgument)
        << "pipeline-parallel training: model '" << path << "' has no batched first input";
    const ir::Dim& d = g.inputs()[0]->type().shape[0];
    KILN_CHECK(!d.is_static(), kInvalidArgument)
        << "pipeline-parallel training: input '" << g.inputs()[0]->name() << "' has a fixed batch dim (" << d.value
        << "); microbatches need a symbolic one";
    auto it = dims.find(d.symbol);
    KILN_CHECK(it != dims.end(), kInvalidArgument)
        << "pipeline-parallel training: bind the batch dim '" << d.symbol << "' (the global batch)";
    KILN_CHECK(microbatches >= 1 && it->second % microbatches == 0, kInvalidArgument)
        << "--microbatches " << microbatches << " does not divide " << d.symbol << "=" << it->second;
    std::map<std::string, int64_t> micro = dims;
    micro[d.symbol] = it->second / microbatches;
    for (const ir::Value* in : g.inputs()) {
        const ir::TensorType& t = in->type();
        if (t.rank() > 0 && !t.shape[0].is_static() && t.shape[0].symbol == d.symbol) batched.insert(in->name());
    }
    if (opts.loss.kind != "output") batched.insert(opts.loss.labels);
    return micro;
}

/// The inputs of a step at the global batch: the model's and the labels (the eval graph's).
std::vector<TensorInfo> global_batch_inputs(const std::string& path, const TrainingOptions& opts) {
    ir::Graph g = frontend::import_onnx_file(path);
    compiler::bind_input_shapes(g, opts.session.dims);
    pass::infer_shapes(g, compiler::pass_context());
    const autodiff::ModelState state =
        autodiff::find_model_state(g, frontend::onnx_initializer_names(path), opts.trainable);
    autodiff::TrainingGraph eval = autodiff::build_training_graph(std::move(g), state, loss_spec(opts.loss), {},
                                                                  autodiff::TrainingGraphKind::kEval);
    std::vector<TensorInfo> out;
    for (const ir::Value* v : eval.graph.inputs()) {
        if (std::find(state.params.begin(), state.params.end(), v->name()) != state.params.end()) continue;
        TensorInfo t;
        t.name = v->name();
        t.dtype = v->type().dtype;
        for (int64_t s : v->type().static_shape()) {
            t.shape.push_back(s);
            t.symbols.emplace_back();
        }
        out.push_back(std::move(t));
    }
    return out;
}

/// The batch inputs that stage graph `s` reads (any of its graphs).
std::set<std::string> stage_inputs(const PipelineStageGraph& s, const std::vector<TensorInfo>& batch_inputs) {
    std::set<std::string> read;
    for (const ir::Graph* g : {&s.forward, &s.backward, &s.eval})
        for (const ir::Value* v : g->inputs()) read.insert(v->name());
    std::set<std::string> out;
    for (const TensorInfo& t : batch_inputs)
        if (read.count(t.name)) out.insert(t.name);
    return out;
}

}  // namespace

PipelinePlan make_pipeline_plan(const std::string& onnx_path, const TrainingOptions& opts,
                                const PipelinePlanOptions& popts, int rank) {
    PipelinePlan plan;
    plan.batch_inputs = global_batch_inputs(onnx_path, opts);
    PipelineTrainingSpec spec;
    spec.onnx_path = onnx_path;
    spec.dims = microbatch_dims(onnx_path, opts, popts.microbatches, plan.batched);
    spec.loss = loss_spec(opts.loss);
    spec.trainable = opts.trainable;
    spec.num_ranks = popts.num_ranks;
    spec.stages = popts.stages;
    spec.microbatches = popts.microbatches;
    spec.seed = opts.seed;
    spec.rematerialize = popts.rematerialize;
    PipelineStages stages = build_pipeline_stages(spec);
    plan.params = stages.params;
    std::ostringstream os;
    for (const PipelineStageGraph& s : stages.stages) {
        plan.stage_params.push_back(s.params);
        os << "stage " << s.rank << ": " << s.params.size() << " parameters, " << s.recv_keys.size()
           << " tensors in, estimated forward " << s.estimated_seconds * 1e3 << " ms per microbatch\n";
    }
    plan.describe = os.str();
    plan.split = stage_split_text(plan.stage_params);
    for (const auto& [name, t] : stages.initial) plan.param_types[name] = {t.dtype(), t.shape()};
    plan.stages.resize(stages.stages.size());
    for (size_t r = 0; r < stages.stages.size(); ++r) {
        if (rank >= 0 && static_cast<size_t>(rank) != r) continue;
        PipelineStagePlan& s = plan.stages[r];
        s.graph = std::move(stages.stages[r]);
        if (!s.graph.params.empty()) s.apply = stage_apply_graph(spec, s.graph.params, opts.optimizer);
        for (const std::string& p : s.graph.params) s.initial[p] = stages.initial.at(p);
        s.inputs = stage_inputs(s.graph, plan.batch_inputs);
    }
    return plan;
}

}  // namespace kiln::distributed
