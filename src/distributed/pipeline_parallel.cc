// PipelineParallel (pipeline_parallel.h): the GPipe schedule of one rank.
#include "distributed/pipeline_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <sstream>

#include "autodiff/training_graph.h"
#include "compiler/compile.h"
#include "compiler/optimizer_spec.h"
#include "compiler/training_checkpoint.h"
#include "distributed/microbatch.h"
#include "distributed/pipeline_checkpoint.h"
#include "distributed/pipeline_plan_shipping.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_initializers.h"
#include "pass/infer_shapes.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

/// A partition key (step unset) at step `step`, microbatch `m` (the key's iteration).
TransferKey at(const std::string& partition_key, int64_t step, int64_t m) {
    TransferKey k = parse_transfer_key(partition_key);
    k.step = step;
    k.iter = m;
    return k;
}

/// The key the gradient of `forward`'s tensor travels back under.
TransferKey gradient_key(const TransferKey& forward) {
    TransferKey k = forward;
    k.src_rank = forward.dst_rank;
    k.dst_rank = forward.src_rank;
    k.tensor = "grad/" + forward.tensor;
    return k;
}

/// The key of `tensor` sent from `src` to `dst` at `step` (outside the microbatches' transfers).
TransferKey step_key(int src, int dst, std::string tensor, int64_t step) {
    TransferKey k;
    k.src_rank = src;
    k.dst_rank = dst;
    k.tensor = std::move(tensor);
    k.step = step;
    return k;
}

TransferKey loss_key(int last, int dst, int64_t step) { return step_key(last, dst, "loss", step); }

}  // namespace

PipelineParallel::PipelineParallel(Communicator& comm, const std::string& onnx_path, const TrainingOptions& opts,
                                   const PipelineParallelOptions& popts)
    : comm_(comm), path_(onnx_path), opts_(opts), popts_(popts) {
    KILN_CHECK(opts.recompute == "none", kUnsupported)
        << "pipeline-parallel training does not take --recompute " << opts.recompute
        << " (checkpointing within one training graph); --rematerialize recomputes each stage's forward instead";
    KILN_CHECK(comm.size() >= 2, kInvalidArgument)
        << "pipeline-parallel training needs at least 2 ranks (one stage each); the job has " << comm.size();
    rv_ = std::make_unique<Rendezvous>(comm);
    if (is_worker()) {
        try {
            init(receive_pipeline_stage(*rv_, comm.rank(), comm.size()));
        } catch (...) {
            report_failure();
        }
        return;
    }
    const PipelinePlanOptions plan_options{comm.size(), popts.microbatches, popts.stages, popts.rematerialize};
    PipelinePlan plan = make_pipeline_plan(onnx_path, opts, plan_options, is_master() ? -1 : comm.rank());
    if (is_master()) {
        rv_->set_wait_check([this] { check_workers(); });
        const autodiff::OptimizerSpec spec = compiler::optimizer_spec(opts.optimizer);
        worker_inputs_.resize(static_cast<size_t>(comm.size()));
        worker_names_.resize(static_cast<size_t>(comm.size()));
        for (int r = 1; r < comm.size(); ++r) {
            std::map<std::string, std::pair<DType, Shape>> theirs;
            for (const std::string& p : plan.stage_params[static_cast<size_t>(r)]) theirs[p] = plan.param_types.at(p);
            for (const auto& [name, type] : checkpoint_layout(theirs, spec)) worker_names_[static_cast<size_t>(r)].push_back(name);
            worker_inputs_[static_cast<size_t>(r)] = plan.stages[static_cast<size_t>(r)].inputs;
            ship_pipeline_stage(*rv_, plan, r);  // before compiling ours: the workers compile meanwhile
        }
    }
    init(std::move(plan));
}

void PipelineParallel::init(PipelinePlan plan) {
    batch_inputs_ = std::move(plan.batch_inputs);
    batched_ = std::move(plan.batched);
    params_ = std::move(plan.params);
    stage_params_ = std::move(plan.stage_params);
    param_types_ = std::move(plan.param_types);
    split_ = std::move(plan.split);
    describe_ = std::move(plan.describe);
    PipelineStagePlan& own = plan.stages.at(static_cast<size_t>(comm_.rank()));
    stage_inputs_ = own.inputs;
    stage_ = std::make_unique<PipelineStage>(std::move(own.graph), std::move(own.apply), opts_, own.initial);
    if (popts_.replicas != nullptr && popts_.replicas->size() > 1) {
        replica_grads_ = std::make_unique<ReplicaGradients>(*popts_.replicas, *stage_, popts_.replica_buckets);
        if (replica_grads_->empty()) replica_grads_.reset();  // a stage without parameters: nothing to average
    }
}

PipelineParallel::~PipelineParallel() {
    if (is_master() && !stopped_ && std::uncaught_exceptions() == 0) {
        try {
            stop();
        } catch (...) {  // a destructor must not throw; the job is ending anyway
        }
    }
    if (rv_) rv_->set_wait_check({});
}

PipelineParallel::Values PipelineParallel::receive_inputs(int64_t m) {
    Values in;
    for (const auto& [name, key] : stage_->graph().recv_keys) in[name] = rv_->recv(at(key, step_, m));
    return in;
}

PipelineParallel::Values PipelineParallel::receive_seeds(int64_t m) {
    const PipelineStageGraph& g = stage_->graph();
    Values seeds;
    for (size_t i = 0; i < g.seed_inputs.size(); ++i) {
        Tensor sum;  // a value sent to several stages: their gradients summed in key order
        for (const std::string& key : g.send_keys[i]) accumulate(sum, rv_->recv(gradient_key(at(key, step_, m))));
        seeds[g.seed_inputs[i]] = std::move(sum);
    }
    return seeds;
}

void PipelineParallel::send_outputs(const std::vector<Tensor>& outs, int64_t m) {
    const PipelineStageGraph& g = stage_->graph();
    KILN_CHECK(outs.size() == g.forward_outputs.size() && outs.size() >= g.send_keys.size(), kInternal)
        << "bug in Kiln: stage " << g.rank << "'s forward returned " << outs.size() << " values, expected "
        << g.forward_outputs.size();
    for (size_t i = 0; i < g.send_keys.size(); ++i)
        for (const std::string& key : g.send_keys[i]) rv_->send(at(key, step_, m), outs[i]);
}

void PipelineParallel::send_input_grads(const Values& grads, int64_t m) {
    for (const auto& [name, key] : stage_->graph().recv_keys)
        rv_->send(gradient_key(at(key, step_, m)), grads.at(name));
}

double PipelineParallel::loss_stage_step(const std::vector<Values>& micro) {
    double sum = 0;
    for (size_t m = 0; m < micro.size(); ++m) {
        Values feeds = receive_inputs(static_cast<int64_t>(m));
        feeds.insert(micro[m].begin(), micro[m].end());
        double loss = 0;
        const bool last = m + 1 == micro.size();
        send_input_grads(stage_->backward(feeds, &loss, last ? last_backward_reports() : nullptr),
                         static_cast<int64_t>(m));
        sum += loss;
    }
    return sum / static_cast<double>(micro.size());
}

void PipelineParallel::forward_microbatch(const Values& micro, Values& kept, int64_t m) {
    kept = receive_inputs(m);
    Values feeds = kept;
    feeds.insert(micro.begin(), micro.end());
    std::vector<Tensor> outs = stage_->forward(feeds);
    send_outputs(outs, m);
    for (size_t i = 0; i < outs.size(); ++i) kept[stage_->graph().forward_outputs[i]] = std::move(outs[i]);
}

void PipelineParallel::backward_microbatch(const Values& micro, Values& kept, int64_t m) {
    Values feeds = receive_seeds(m);
    feeds.insert(kept.begin(), kept.end());
    kept.clear();  // the stash of microbatch m is no longer needed once its backward runs
    feeds.insert(micro.begin(), micro.end());
    const bool last = m + 1 == static_cast<int64_t>(popts_.microbatches);
    send_input_grads(stage_->backward(feeds, nullptr, last ? last_backward_reports() : nullptr), m);
}

void PipelineParallel::inner_stage_step(const std::vector<Values>& micro) {
    // Per microbatch, what its backward reads besides the batch: the activations received and the
    // forward's outputs (the stash; with rematerialize only the values sent, which it ignores).
    const int64_t count = static_cast<int64_t>(micro.size());
    std::vector<Values> kept(micro.size());
    // GPipe: every forward, then every backward. 1F1B: the forwards of the microbatches still in
    // the later stages (N-1-r of them), then a forward and a backward in turn, then the backwards
    // left. Either way a stage runs its backwards in microbatch order, so its gradient sums are
    // the same bit for bit.
    const int64_t ahead = popts_.schedule == PipelineSchedule::kOneForwardOneBackward
                              ? std::min<int64_t>(comm_.size() - 1 - comm_.rank(), count)
                              : count;
    int64_t next_backward = 0;
    for (int64_t m = 0; m < count; ++m) {
        forward_microbatch(micro[static_cast<size_t>(m)], kept[static_cast<size_t>(m)], m);
        peak_stashed_ = std::max(peak_stashed_, static_cast<int>(m + 1 - next_backward));
        if (m >= ahead) {
            backward_microbatch(micro[static_cast<size_t>(next_backward)], kept[static_cast<size_t>(next_backward)],
                                next_backward);
            ++next_backward;
        }
    }
    for (; next_backward < count; ++next_backward)
        backward_microbatch(micro[static_cast<size_t>(next_backward)], kept[static_cast<size_t>(next_backward)],
                            next_backward);
}

void PipelineParallel::check_batch(const std::map<std::string, Tensor>& batch) const {
    for (const TensorInfo& info : batch_inputs_) {
        if (is_worker() && !stage_inputs_.count(info.name)) continue;  // a worker is sent only what its stage reads
        KILN_CHECK(batch.count(info.name), kInvalidArgument)
            << "pipeline-parallel step: the batch has no input '" << info.name << "'";
    }
}

std::vector<PipelineParallel::Values> PipelineParallel::microbatches(const std::map<std::string, Tensor>& batch) const {
    check_batch(batch);
    // The batched inputs cut along their leading axis; the others (no batch dim) go whole to each.
    Values batched, whole;
    for (const auto& [name, t] : batch) (batched_.count(name) ? batched : whole).emplace(name, t);
    std::vector<Values> micro = split_microbatches(batched, popts_.microbatches);
    for (Values& m : micro) m.insert(whole.begin(), whole.end());
    return micro;
}

std::optional<StepResult> PipelineParallel::eval_step(const std::map<std::string, Tensor>& batch) {
    if (is_master()) {
        check_batch(batch);
        order(kEval, 0, &batch);
    }
    const std::vector<Values> micro = microbatches(batch);
    const PipelineStageGraph& g = stage_->graph();
    // The training keys in frame 1 + the evaluation's batch count: never a training step's (frame 0).
    auto key = [&](const std::string& partition_key, int64_t m) {
        TransferKey k = at(partition_key, step_, m);
        k.frame = 1 + eval_batches_;
        return k;
    };
    double loss = 0;
    std::vector<std::vector<Tensor>> outputs;
    for (size_t m = 0; m < micro.size(); ++m) {
        Values feeds = micro[m];
        for (const auto& [name, k] : g.recv_keys) feeds[name] = rv_->recv(key(k, static_cast<int64_t>(m)));
        std::vector<Tensor> outs = stage_->evaluate(feeds);
        if (g.computes_loss) {
            loss += outs.at(0).get_f64(0);
            // A scalar output (--loss output: the model's own loss) has no batch dim to join along.
            if (!outs.at(1).shape().empty()) outputs.push_back({outs.at(1)});
            continue;
        }
        for (size_t i = 0; i < g.send_keys.size(); ++i)
            for (const std::string& k : g.send_keys[i]) rv_->send(key(k, static_cast<int64_t>(m)), outs.at(i));
    }
    if (!g.computes_loss) return eval_result(std::nullopt);
    StepResult r;
    r.loss = loss / static_cast<double>(micro.size());
    if (!outputs.empty())
        r.outputs = join_microbatches(outputs, {opts_.loss.output.empty() ? "the loss's output" : opts_.loss.output});
    return eval_result(std::move(r));
}

std::vector<double> PipelineParallel::from_loss_stage(const std::vector<double>& values) {
    if (is_master()) return values;  // eval_step gave the master the loss stage's results
    const int last = comm_.size() - 1;
    const int64_t call = ++shared_;  // every rank counts its calls alike
    auto key = [&](int dst) {
        TransferKey k = loss_key(last, dst, step_);
        k.tensor = "shared";
        k.iter = call;
        return k;
    };
    std::vector<double> out = values;
    if (comm_.rank() == last) {
        Tensor t(DType::kFloat64, {static_cast<int64_t>(values.size())});
        for (size_t i = 0; i < values.size(); ++i) t.set_f64(static_cast<int64_t>(i), values[i]);
        for (int r = 0; r < last; ++r) rv_->send(key(r), t);
    } else {
        const Tensor t = rv_->recv(key(comm_.rank()));
        out.resize(static_cast<size_t>(t.numel()));
        for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.get_f64(i);
    }
    return out;
}

double PipelineParallel::run_step(const std::map<std::string, Tensor>& batch, double lr) {
    const auto t0 = Clock::now();
    stage_->forward_s = stage_->backward_s = stage_->apply_s = 0;
    peak_stashed_ = 0;
    std::vector<Values> micro = microbatches(batch);
    const int last = comm_.size() - 1;
    double loss = 0;
    if (replica_grads_) replica_grads_->begin();
    if (stage_->graph().computes_loss) {
        loss = loss_stage_step(micro);
        average_over_replicas(&loss);
        Tensor t(DType::kFloat64, {});
        t.set_f64(0, loss);
        for (int r = 0; r < last; ++r) rv_->send(loss_key(last, r, step_), t);
        stage_->apply(step_, lr, clip_factor());
    } else {
        inner_stage_step(micro);
        average_over_replicas(nullptr);
        stage_->apply(step_, lr, clip_factor());
        loss = rv_->recv(loss_key(last, comm_.rank(), step_)).get_f64(0);
    }
    ++step_;
    stats_.step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    stats_.forward_s = stage_->forward_s;
    stats_.backward_s = stage_->backward_s;
    stats_.apply_s = stage_->apply_s;
    stats_.peak_stashed = peak_stashed_;
    stats_.grad_norm = grad_norm_;
    return loss;
}

void PipelineParallel::average_over_replicas(double* loss) {
    if (!replica_grads_) return;
    replica_grads_->finish(stage_->gradients(), loss);
    stats_.replica_buckets = static_cast<int>(replica_grads_->buckets());
    stats_.replica_buckets_started_early = static_cast<int>(replica_grads_->started_during_backward());
}

const PipelineStage::GradientReady* PipelineParallel::last_backward_reports() const {
    return replica_grads_ ? replica_grads_->on_sum() : nullptr;
}

double PipelineParallel::clip_factor() {
    grad_norm_ = 0;
    if (opts_.optimizer.clip_norm <= 0) return 1.0;
    // Every rank's square sum to every other, added in rank order: the same double everywhere.
    auto key = [&](int src, int dst) { return step_key(src, dst, "clip/square_sum", step_); };
    Tensor own(DType::kFloat64, {});
    own.set_f64(0, stage_->gradient_square_sum());
    for (int r = 0; r < comm_.size(); ++r)
        if (r != comm_.rank()) rv_->send(key(comm_.rank(), r), own);
    double total = 0;
    for (int r = 0; r < comm_.size(); ++r)
        total += r == comm_.rank() ? own.get_f64(0) : rv_->recv(key(r, comm_.rank())).get_f64(0);
    grad_norm_ = std::sqrt(total);
    return autodiff::clip_factor_of_norm(opts_.optimizer.clip_norm, grad_norm_);
}

void PipelineParallel::save_checkpoint(const std::string& path, const std::map<std::string, std::string>& extra) {
    ++checkpoints_;
    if (!writes()) return;  // another replica's state is replica 0's
    if (is_master()) order(kSave, 0);
    auto key = [&](int src, const std::string& name) {
        TransferKey k = step_key(src, 0, "checkpoint/" + name, step_);
        k.iter = checkpoints_;  // two checkpoints of one step (--checkpoint-every and the epoch's end) differ
        return k;
    };
    // This rank's tensors under their checkpoint names.
    std::map<std::string, Tensor> own;
    for (const std::string& p : stage_->parameter_names()) own[checkpoint_param_name(p)] = stage_->parameter(p);
    for (const auto& [name, t] : stage_->optimizer_state()) own[checkpoint_state_name(name)] = t;
    if (comm_.rank() != 0) {
        for (const auto& [name, t] : own) rv_->send(key(comm_.rank(), name), t);
        return;
    }
    compiler::Checkpoint c;
    c.step = step_;
    c.extra = extra;
    c.extra["pipeline_stages"] = split_;
    c.extra["pipeline_microbatches"] = std::to_string(popts_.microbatches);
    c.tensors = std::move(own);
    const autodiff::OptimizerSpec spec = compiler::optimizer_spec(opts_.optimizer);
    for (int r = 1; r < comm_.size(); ++r) {
        std::map<std::string, std::pair<DType, Shape>> theirs;
        for (const std::string& p : stage_params_[static_cast<size_t>(r)]) theirs[p] = param_types_.at(p);
        for (const auto& [name, type] : checkpoint_layout(theirs, spec)) c.tensors[name] = rv_->recv(key(r, name));
    }
    check_checkpoint_tensors(path, c, checkpoint_layout(param_types_, spec));  // a bug if it fails: all gathered
    compiler::write_checkpoint(path, c);
}

std::set<std::string> PipelineParallel::checkpoint_names() const {
    std::set<std::string> own;
    for (const std::string& p : stage_->parameter_names()) own.insert(checkpoint_param_name(p));
    for (const auto& [name, t] : stage_->optimizer_state()) own.insert(checkpoint_state_name(name));
    return own;
}

std::map<std::string, std::string> PipelineParallel::load_checkpoint(const std::string& path) {
    // Only this stage's tensors are copied out of the file; the others' types are checked. A
    // master then reads each worker's stage in turn and sends it (send_checkpoint).
    const std::set<std::string> own = checkpoint_names();
    compiler::Checkpoint c = compiler::read_checkpoint(path, [&](const std::string& name) { return own.count(name) > 0; });
    check_checkpoint_tensors(path, c, checkpoint_layout(param_types_, compiler::optimizer_spec(opts_.optimizer)));
    if (is_master()) send_checkpoint(path, c.step);
    PipelineStage::Values params, state;
    for (const std::string& p : stage_->parameter_names()) params[p] = c.tensors.at(checkpoint_param_name(p));
    for (const auto& [name, t] : stage_->optimizer_state()) state[name] = c.tensors.at(checkpoint_state_name(name));
    stage_->load_state(params, state);
    step_ = c.step;
    return c.extra;
}

std::map<std::string, Tensor> PipelineParallel::gather_parameters() {
    auto key = [&](int src, const std::string& name) { return step_key(src, 0, "param/" + name, step_); };
    std::map<std::string, Tensor> all;
    if (is_master()) order(kGather, 0);
    if (comm_.rank() != 0) {
        for (const std::string& p : stage_->parameter_names()) rv_->send(key(comm_.rank(), p), stage_->parameter(p));
        return all;
    }
    for (const std::string& p : stage_->parameter_names()) all[p] = stage_->parameter(p).clone();
    for (int r = 1; r < comm_.size(); ++r)
        for (const std::string& p : stage_params_[static_cast<size_t>(r)]) all[p] = rv_->recv(key(r, p));
    return all;
}

void PipelineParallel::export_onnx(const std::string& path) {
    if (!writes()) return;
    std::map<std::string, Tensor> values = gather_parameters();
    if (comm_.rank() == 0) compiler::write_file_atomically(path, frontend::onnx_with_initializers(path_, values));
}

}  // namespace kiln::distributed
