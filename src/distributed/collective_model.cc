#include "distributed/collective_model.h"

#include "compiler/compile.h"
#include "compiler/model_compile_options.h"
#include "distributed/collective_wave.h"
#include "distributed/collectives.h"
#include "distributed/partitioned_run.h"
#include "pass/infer_shapes.h"
#include "support/error.h"

namespace kiln::distributed {

struct CollectiveModel::Stage {
    std::shared_ptr<runtime::PreparedExecutable> prepared;  // null: the stage returns nothing
    std::vector<std::string> output_names;                  // before compile() rewrote the graph
};

CollectiveModel::CollectiveModel(ir::Graph g, const SessionOptions& opts, Communicator* comm)
    : comm_(comm), runner_(std::make_unique<runtime::ModelRunner>(runtime::runner_options(opts))) {
    compiler::bind_input_shapes(g, opts.dims);
    // The stages' inputs take the types of the values they receive: static once dims are bound
    // (AllGather/ReduceScatter of a symbolic axis were "?" at import).
    pass::infer_shapes(g, compiler::pass_context());
    for (const ir::Value* v : g.inputs()) inputs_.push_back(tensor_info_of(*v));
    for (const ir::Value* v : g.outputs()) outputs_.push_back(tensor_info_of(*v));
    stages_ = split_at_collectives(g);
    compiler::CompileOptions copts = compiler::compile_options_for(opts, runner_->stats().intra_op_threads);
    copts.plan_for_concurrency = runner_->plans_for_concurrency();
    for (ir::Graph& sg : stages_.stages) {
        auto s = std::make_unique<Stage>();
        for (const ir::Value* v : sg.outputs()) s->output_names.push_back(v->name());
        if (!sg.outputs().empty()) {
            compiler::CompiledModel m = compiler::compile(sg, copts);
            kernels_ += m.stats.kernels;
            s->prepared = runner_->prepare(m.executable);
        }
        compiled_.push_back(std::move(s));
    }
}

CollectiveModel::~CollectiveModel() = default;

size_t CollectiveModel::collective_nodes() const {
    size_t n = 0;
    for (const auto& w : stages_.waves) n += w.size();
    return n;
}

void CollectiveModel::run_stage(Stage& s, std::map<std::string, Tensor>& values) {
    if (!s.prepared) return;
    const runtime::Executable& exe = *s.prepared->exe;
    std::vector<Tensor> inputs;
    for (int id : exe.inputs) {
        const std::string& name = exe.buffers[id].name;
        auto it = values.find(name);
        KILN_CHECK(it != values.end(), kInvalidArgument) << "missing input '" << name << "'";
        inputs.push_back(it->second);
    }
    std::vector<Tensor> outputs;
    runner_->run(*s.prepared, inputs, outputs, runtime::RunControls{}).throw_if_error();
    KILN_CHECK(outputs.size() == s.output_names.size(), kInternal)
        << "bug in Kiln: a stage graph has " << s.output_names.size() << " outputs, its executable " << outputs.size();
    for (size_t i = 0; i < outputs.size(); ++i) values[s.output_names[i]] = outputs[i];
}

std::vector<Tensor> CollectiveModel::run(const std::map<std::string, Tensor>& feeds) {
    std::map<std::string, Tensor> values = stages_.constants;
    for (const auto& [name, t] : feeds) values[name] = t;
    for (const TensorInfo& in : inputs_)
        KILN_CHECK(feeds.count(in.name), kInvalidArgument) << "missing input '" << in.name << "'";
    const size_t calls_before = collective_data_calls();
    for (size_t k = 0; k < compiled_.size(); ++k) {
        run_stage(*compiled_[k], values);
        if (k < stages_.waves.size()) run_collective_wave(comm_, stages_.waves[k], values);
    }
    last_run_calls_ = collective_data_calls() - calls_before;
    std::vector<Tensor> outs;
    for (const std::string& name : stages_.outputs) {
        auto it = values.find(name);
        KILN_CHECK(it != values.end(), kInternal) << "bug in Kiln: model output '" << name << "' was never computed";
        outs.push_back(it->second);
    }
    return outs;
}

}  // namespace kiln::distributed
