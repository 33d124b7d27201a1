// Gradients with synchronized BatchNormalization statistics (sync_batch_norm_gradients.h).
#include "distributed/sync_batch_norm_gradients.h"

#include "compiler/training_graph_source.h"
#include "distributed/collective_model.h"
#include "distributed/collectives.h"
#include "kiln/error.h"

namespace kiln::distributed {

SyncBatchNormGradients::SyncBatchNormGradients(Communicator& comm, TrainingSession& session)
    : session_(session), source_(compiler::training_graph_source(session)) {
    KILN_CHECK(source_, kInvalidArgument)
        << "sync_batch_norm: the session is not one of TrainingSession::create (it cannot build its gradients graph "
           "with global statistics)";
    const TrainingOptions& opts = source_->training_options();
    // Recomputation would copy forward nodes, collectives among them, into the backward pass.
    KILN_CHECK(opts.recompute == "none", kUnsupported)
        << "sync_batch_norm: activation recomputation (recompute '" << opts.recompute
        << "') is not supported with synchronized BatchNormalization";
    autodiff::TrainingGraph tg =
        source_->build_graph(autodiff::TrainingGraphKind::kGradients, autodiff::BatchNormStatistics::kGlobal);
    layers_ = tg.synchronized_batch_norms;
    if (layers_.empty()) return;  // nothing to synchronize: DataParallel steps as without
    for (const auto& [name, t] : source_->running_statistics())
        descriptions_.push_back("sync batch norm: " + describe({name, Tensor(t.dtype(), t.shape())}));
    outputs_ = tg.outputs;
    model_ = std::make_unique<CollectiveModel>(std::move(tg.graph), opts.session, &comm);
}

SyncBatchNormGradients::~SyncBatchNormGradients() = default;

// The session's own gradients() checks its batch; this path feeds the graph directly.
void SyncBatchNormGradients::check_batch(const std::map<std::string, Tensor>& batch) const {
    for (const TensorInfo& info : session_.batch_inputs()) {
        auto it = batch.find(info.name);
        KILN_CHECK(it != batch.end(), kInvalidArgument) << "batch has no input '" << info.name << "'";
        const Shape want(info.shape.begin(), info.shape.end());
        KILN_CHECK(it->second.dtype() == info.dtype && it->second.shape() == want, kInvalidArgument)
            << "batch input '" << info.name << "': expected " << dtype_name(info.dtype) << shape_str(want) << ", got "
            << dtype_name(it->second.dtype()) << shape_str(it->second.shape());
    }
}

std::map<std::string, Tensor> SyncBatchNormGradients::gradients(const std::map<std::string, Tensor>& batch,
                                                                double* loss) {
    KILN_CHECK(model_, kInternal) << "bug in Kiln: synchronized gradients of a model without BatchNormalization";
    check_batch(batch);
    std::map<std::string, Tensor>& stats = source_->running_statistics();
    std::map<std::string, Tensor> feeds = batch;
    for (const std::string& name : session_.parameter_names()) feeds[name] = session_.parameter(name);
    for (const auto& [name, t] : stats) feeds[name] = t;
    std::vector<Tensor> outs = model_->run(feeds);
    KILN_CHECK(outs.size() == outputs_.size(), kInternal)
        << "bug in Kiln: the synchronized gradients graph returned " << outs.size() << " outputs, expected "
        << outputs_.size();
    std::map<std::string, Tensor> grads;
    for (size_t i = 0; i < outs.size(); ++i) {
        const auto [role, name] = autodiff::split_role_key(outputs_[i]);
        if (role == "loss" && loss) *loss = outs[i].get_f64(0);
        else if (role == "grad") grads[name] = outs[i];
        else if (role == "stat") stats[name] = outs[i];
    }
    return grads;
}

}  // namespace kiln::distributed
