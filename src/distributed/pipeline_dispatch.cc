// PipelineParallel's master dispatch (pipeline_parallel.h's file comment): the master's orders,
// a worker's serve() loop and its error report, the steps ordered ahead, and what the loss
// stage and a checkpoint send to and from the master.
#include <chrono>
#include <exception>
#include <set>
#include <sstream>
#include <thread>

#include "compiler/training_checkpoint.h"
#include "distributed/pipeline_checkpoint.h"
#include "distributed/pipeline_parallel.h"
#include "distributed/rank_graph_shipping.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

/// The keys of orders and their inputs (0 -> w, step = the order's number) and of a worker's
/// error report (w -> 0).
TransferKey order_key(int worker, int64_t order) { return TransferKey{0, 1, worker, "order", 0, 0, order}; }
TransferKey input_key(int worker, const std::string& name, int64_t order) {
    return TransferKey{0, 1, worker, "input:" + name, 0, 0, order};
}
TransferKey error_key(int worker) { return TransferKey{worker, 1, 0, "error", 0, 0, 0}; }

/// How long a failed worker waits for the master to end the job before ending it itself.
constexpr double kWorkerGraceSeconds = 5.0;

}  // namespace

int64_t PipelineParallel::order(Order kind, double arg, const std::map<std::string, Tensor>* batch) {
    KILN_CHECK(!stopped_, kInvalidArgument) << "pipeline-parallel: an order after the workers were stopped";
    KILN_CHECK(kind == kStep || queued_.empty(), kInvalidArgument)
        << "pipeline-parallel: " << queued_.size() << " step(s) enqueued and not run before another call";
    const int64_t n = next_order_++;
    Tensor o(DType::kFloat64, {2});
    o.set_f64(0, static_cast<double>(kind));
    o.set_f64(1, arg);
    for (int w = 1; w < comm_.size(); ++w) {
        rv_->send(order_key(w, n), o);
        if (batch)
            for (const std::string& name : worker_inputs_[static_cast<size_t>(w)])
                rv_->send(input_key(w, name, n), batch->at(name));
    }
    return n;
}

void PipelineParallel::stop() {
    if (!is_master() || stopped_) return;
    order(kStop, 0);
    stopped_ = true;
}

void PipelineParallel::check_workers() {
    for (int w = 1; w < comm_.size(); ++w)
        if (std::optional<Tensor> e = rv_->try_recv(error_key(w))) {
            std::ostringstream who;
            who << "worker rank " << w;
            if (popts_.replicas != nullptr) who << " of replica " << popts_.replicas->rank() << "'s pipeline";
            KILN_THROW(kIOError) << who.str() << " failed: " << tensor_as_text(*e);
        }
}

void PipelineParallel::report_failure() {
    const std::exception_ptr error = std::current_exception();
    std::string what = "an unknown error";
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
    }
    rv_->send(error_key(comm_.rank()), text_as_tensor(what));
    // The master ends the job when it next waits; should it not, the caller's abort ends it.
    const auto until = Clock::now() + std::chrono::duration<double>(kWorkerGraceSeconds);
    while (Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::rethrow_exception(error);
}

void PipelineParallel::serve() {
    KILN_CHECK(is_worker(), kInvalidArgument) << "pipeline-parallel: serve() is a worker's (master dispatch, rank > 0)";
    try {
        for (int64_t n = 0;; ++n) {
            // No deadline: the master may pause (evaluation, a checkpoint); a lost master is the heartbeat's.
            const Tensor o = rv_->recv(order_key(comm_.rank(), n), 0);
            const auto kind = static_cast<Order>(static_cast<int>(o.get_f64(0)));
            const double arg = o.get_f64(1);
            Values batch;
            if (kind == kStep || kind == kEval)
                for (const std::string& name : stage_inputs_) batch[name] = rv_->recv(input_key(comm_.rank(), name, n), 0);
            switch (kind) {
                case kStop: return;
                case kStep: run_step(batch, arg); break;
                case kEval: eval_step(batch); break;
                case kSave: save_checkpoint("", {}); break;
                case kLoad: receive_checkpoint(static_cast<int64_t>(arg), n); break;
                case kGather: gather_parameters(); break;
                default: KILN_THROW(kInvalidArgument) << "pipeline-parallel worker: unknown order " << o.get_f64(0);
            }
        }
    } catch (...) {
        report_failure();
    }
}



void PipelineParallel::enqueue(const std::map<std::string, Tensor>& batch) {
    KILN_CHECK(!is_worker(), kInvalidArgument) << "pipeline-parallel: a worker's steps are the master's orders";
    check_batch(batch);
    const int64_t step = step_ + static_cast<int64_t>(queued_.size());
    if (is_master()) order(kStep, opts_.schedule.at(step, opts_.optimizer.lr), &batch);
    queued_.push_back(batch);
}

double PipelineParallel::step() {
    KILN_CHECK(!queued_.empty(), kInvalidArgument) << "pipeline-parallel: step() without an enqueued batch";
    const std::map<std::string, Tensor> batch = std::move(queued_.front());
    queued_.pop_front();
    return run_step(batch, opts_.schedule.at(step_, opts_.optimizer.lr));
}

double PipelineParallel::step(const std::map<std::string, Tensor>& batch) {
    KILN_CHECK(queued_.empty(), kInvalidArgument)
        << "pipeline-parallel: step(batch) with " << queued_.size() << " step(s) enqueued; call step()";
    enqueue(batch);
    return step();
}

std::optional<StepResult> PipelineParallel::eval_result(std::optional<StepResult> own) {
    const int64_t frame = 1 + eval_batches_++;
    if (popts_.dispatch != PipelineDispatch::kMaster) return own;
    // Under master dispatch the loss stage's results go to the master, which alone returns them.
    const int last = comm_.size() - 1;
    auto key = [&](const std::string& what, int64_t i) {
        TransferKey k{last, 1, 0, "eval/" + what, frame, i, step_};
        return k;
    };
    if (own) {  // the loss stage, a worker
        Tensor loss(DType::kFloat64, {});
        loss.set_f64(0, own->loss);
        rv_->send(key("loss", 0), loss);
        Tensor count(DType::kInt64, {1});
        count.set_i64(0, static_cast<int64_t>(own->outputs.size()));
        rv_->send(key("outputs", 0), count);
        for (size_t i = 0; i < own->outputs.size(); ++i) rv_->send(key("output", static_cast<int64_t>(i)), own->outputs[i]);
        return std::nullopt;
    }
    if (!is_master()) return std::nullopt;
    StepResult r;
    r.loss = rv_->recv(key("loss", 0)).get_f64(0);
    const int64_t count = rv_->recv(key("outputs", 0)).get_i64(0);
    for (int64_t i = 0; i < count; ++i) r.outputs.push_back(rv_->recv(key("output", i)));
    return r;
}

void PipelineParallel::receive_checkpoint(int64_t step, int64_t order) {
    auto key = [&](const std::string& name) { return input_key(comm_.rank(), "checkpoint/" + name, order); };
    PipelineStage::Values params, state;
    for (const std::string& p : stage_->parameter_names()) params[p] = rv_->recv(key(checkpoint_param_name(p)), 0);
    for (const auto& [name, t] : stage_->optimizer_state()) state[name] = rv_->recv(key(checkpoint_state_name(name)), 0);
    stage_->load_state(params, state);
    step_ = step;
}

void PipelineParallel::send_checkpoint(const std::string& path, int64_t step) {
    const int64_t n = order(kLoad, static_cast<double>(step));
    // One worker's stage at a time: the master never holds the whole model's state (each read
    // maps the file and checksums it whole, as every rank's read does without a master).
    for (int w = 1; w < comm_.size(); ++w) {
        const std::vector<std::string>& names = worker_names_[static_cast<size_t>(w)];
        const std::set<std::string> keep(names.begin(), names.end());
        const compiler::Checkpoint c =
            compiler::read_checkpoint(path, [&](const std::string& name) { return keep.count(name) > 0; });
        for (const std::string& name : names) rv_->send(input_key(w, "checkpoint/" + name, n), c.tensors.at(name));
    }
}

}  // namespace kiln::distributed
