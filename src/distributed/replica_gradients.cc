// ReplicaGradients (replica_gradients.h).
#include "distributed/replica_gradients.h"

#include "distributed/agreement.h"
#include "support/error.h"

namespace kiln::distributed {

ReplicaGradients::ReplicaGradients(Communicator& replicas, const PipelineStage& stage,
                                   const DataParallelOptions& opts)
    : comm_(replicas), opts_(opts), loss_(stage.graph().computes_loss) {
    const std::vector<std::string>& names = stage.parameter_names();
    size_t bytes = 0;
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
        const Tensor& p = stage.parameter(*it);
        if (buckets_.empty() || (bytes > 0 && bytes + p.nbytes() > opts_.bucket_bytes)) buckets_.emplace_back(), bytes = 0;
        slot_[*it] = {buckets_.size() - 1, buckets_.back().size()};
        buckets_.back().push_back("grad/" + *it);
        bytes += p.nbytes();
        descriptions_.push_back("bucket " + std::to_string(buckets_.size() - 1) + ": " +
                                describe({"grad/" + *it, Tensor(p.dtype(), p.shape())}));
    }
    if (loss_) {
        if (buckets_.empty()) buckets_.emplace_back();
        buckets_.back().push_back("loss");
        descriptions_.push_back("bucket " + std::to_string(buckets_.size() - 1) + ": loss f64[]");
    }
    on_sum_ = [this](const std::string& name, const Tensor& sum) {
        auto s = slot_.find(name);
        if (s != slot_.end() && launcher_) launcher_->put(s->second.first, s->second.second, {"grad/" + name, sum}, true);
    };
}

ReplicaGradients::~ReplicaGradients() = default;

void ReplicaGradients::begin() {
    if (empty()) return;
    if (!checked_ && comm_.options().check_agreement)
        check_agreement(comm_, "pipeline stage's gradient allreduce over its replicas", descriptions_);
    checked_ = true;
    std::vector<size_t> sizes;
    for (const auto& b : buckets_) sizes.push_back(b.size());
    launcher_ = std::make_unique<BucketLauncher>(comm_, sizes, true, opts_.use_comm_thread(comm_));
}

void ReplicaGradients::finish(std::map<std::string, Tensor>& sums, double* loss) {
    if (empty()) return;
    KILN_CHECK(launcher_, kInternal) << "bug in Kiln: ReplicaGradients::finish without begin";
    for (const auto& [name, s] : slot_) {
        if (launcher_->has(s.first, s.second)) continue;
        auto g = sums.find(name);
        KILN_CHECK(g != sums.end(), kInternal) << "bug in Kiln: the stage has no gradient of '" << name << "'";
        launcher_->put(s.first, s.second, {"grad/" + name, g->second}, true);
    }
    Tensor l(DType::kFloat64, {});
    if (loss_) {
        KILN_CHECK(loss, kInternal) << "bug in Kiln: the loss stage's replicas average no loss";
        l.set_f64(0, *loss);
        launcher_->put(buckets_.size() - 1, buckets_.back().size() - 1, {"loss", l}, false);
    }
    launcher_->finish();  // in place: `sums` share their storage with the buckets' tensors
    // A bucket started before the last gradient sum was reported overlapped the backward.
    started_during_backward_ = 0;
    for (int r : launcher_->reported_at_start())
        started_during_backward_ += r >= 0 && r < static_cast<int>(slot_.size());
    launcher_.reset();
    if (loss_) *loss = l.get_f64(0);
}

}  // namespace kiln::distributed
