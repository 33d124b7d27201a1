// kiln/pipeline_parallel.h over distributed::PipelineParallel: the job's ranks grouped into
// pipelines (and replicas of them) as `kiln train --pipeline-parallel` groups them.
#include "kiln/pipeline_parallel.h"

#include "distributed/communicator.h"
#include "distributed/pipeline_groups.h"
#include "distributed/pipeline_parallel.h"
#include "kiln/training.h"
#include "support/error.h"

namespace kiln {

namespace {

distributed::PipelineParallelOptions pipeline_options(const PipelineTrainerOptions& o,
                                                      const distributed::PipelineGroups& g) {
    KILN_CHECK(o.schedule == "gpipe" || o.schedule == "1f1b", kInvalidArgument)
        << "pipeline schedule must be 'gpipe' or '1f1b', got '" << o.schedule << "'";
    distributed::PipelineParallelOptions po;
    po.microbatches = o.microbatches;
    po.stages = o.stages;
    po.rematerialize = o.rematerialize;
    if (o.schedule == "1f1b") po.schedule = distributed::PipelineSchedule::kOneForwardOneBackward;
    po.replicas = g.replicas_of_stage.get();
    if (o.bucket_bytes > 0) po.replica_buckets.bucket_bytes = o.bucket_bytes;
    return po;
}

}  // namespace

struct PipelineTrainer::Impl {
    distributed::PipelineGroups groups;
    std::unique_ptr<distributed::PipelineParallel> pp;
};

PipelineTrainer::PipelineTrainer(const std::string& onnx_path, const TrainingOptions& opts,
                                 const PipelineTrainerOptions& popts)
    : impl_(new Impl) {
    distributed::Communicator& world = distributed::Communicator::get();
    impl_->groups = distributed::group_pipeline_ranks(world, popts.pipeline_stages, popts.data_parallel);
    TrainingOptions o = opts;
    o.seed = distributed::replica_seed(o.seed, impl_->groups.replica);
    const distributed::PipelineParallelOptions po = pipeline_options(popts, impl_->groups);
    distributed::Communicator& pipeline = impl_->groups.pipeline ? *impl_->groups.pipeline : world;
    impl_->pp = std::make_unique<distributed::PipelineParallel>(pipeline, onnx_path, o, po);
}

PipelineTrainer::~PipelineTrainer() = default;

const std::vector<TensorInfo>& PipelineTrainer::batch_inputs() const { return impl_->pp->batch_inputs(); }
double PipelineTrainer::step(const std::map<std::string, Tensor>& batch) { return impl_->pp->step(batch); }

StepResult PipelineTrainer::eval_step(const std::map<std::string, Tensor>& batch) {
    std::optional<StepResult> r = impl_->pp->eval_step(batch);
    const double loss = impl_->pp->from_loss_stage({r ? r->loss : 0.0}).at(0);
    StepResult out = r ? std::move(*r) : StepResult{};
    out.loss = loss;
    return out;
}

int64_t PipelineTrainer::steps() const { return impl_->pp->steps(); }
int PipelineTrainer::stage() const { return impl_->groups.stage; }
int PipelineTrainer::stages() const { return impl_->groups.stages; }
int PipelineTrainer::replica() const { return impl_->groups.replica; }
int PipelineTrainer::replicas() const { return impl_->groups.replicas; }
const std::string& PipelineTrainer::describe() const { return impl_->pp->describe(); }
std::vector<std::string> PipelineTrainer::stage_parameter_names() const { return impl_->pp->stage().parameter_names(); }
std::map<std::string, Tensor> PipelineTrainer::gather_parameters() { return impl_->pp->gather_parameters(); }
void PipelineTrainer::export_onnx(const std::string& path) { impl_->pp->export_onnx(path); }

void PipelineTrainer::save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra) {
    impl_->pp->save_checkpoint(path, extra);
}

std::map<std::string, std::string> PipelineTrainer::load_checkpoint(const std::string& path) {
    return impl_->pp->load_checkpoint(path);
}

PipelineTrainerStats PipelineTrainer::last_step_stats() const {
    const distributed::PipelineStepStats& s = impl_->pp->last_step_stats();
    return {s.step_s, s.forward_s, s.backward_s, s.apply_s, s.peak_stashed};
}

}  // namespace kiln
