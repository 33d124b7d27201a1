// One model version: load, queue, batch, run on granted cores, answer (model_version.h).
#include "serve/model_version.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "serve/batch_tensors.h"
#include "serve/preemption_trace.h"
#include "serve/request_validation.h"
#include "serve/thread_priority.h"

namespace kiln::serve {
namespace {

using std::chrono::nanoseconds;

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Code code_of(const Error& e) {
    switch (e.kind()) {
        case ErrorKind::kInvalidArgument: return Code::kInvalidArgument;
        case ErrorKind::kCancelled: return Code::kCancelled;
        // The session's memory budget (memory_limit_mb) was exceeded: the server is out of a
        // resource for now (503), not broken; an op or dtype Kiln does not take for this
        // request is the request's problem (400). REVIEW item 6.
        case ErrorKind::kOutOfMemory: return Code::kUnavailable;
        case ErrorKind::kUnsupported: return Code::kInvalidArgument;
        default: return Code::kInternal;
    }
}

/// The values of the inputs' symbolic dims in `feed` (Session::specialize's argument).
std::map<std::string, int64_t> symbol_dims(const std::vector<TensorInfo>& infos, const std::map<std::string, Tensor>& feed) {
    std::map<std::string, int64_t> dims;
    for (const TensorInfo& info : infos) {
        const Shape& shape = feed.at(info.name).shape();
        for (size_t d = 0; d < info.symbols.size() && d < shape.size(); ++d)
            if (!info.symbols[d].empty()) dims.emplace(info.symbols[d], shape[d]);
    }
    return dims;
}

}  // namespace

const char* ModelVersion::state_name(State s) {
    switch (s) {
        case State::kLoading: return "LOADING";
        case State::kReady: return "READY";
        case State::kUnavailable: return "UNAVAILABLE";
        case State::kUnloading: return "UNLOADING";
    }
    return "UNKNOWN";
}

ModelVersion::ModelVersion(std::string model, int64_t version, std::string path,
                           std::optional<std::string> config_text, ServingContext ctx)
    : model_(std::move(model)),
      version_(version),
      version_str_(std::to_string(version)),
      path_(std::move(path)),
      config_text_(std::move(config_text)),
      ctx_(ctx),
      stats_(model_, version_str_) {}

ModelVersion::~ModelVersion() { stop(false); }

ModelVersion::State ModelVersion::state() const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
}

std::string ModelVersion::reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
}

std::vector<std::string> ModelVersion::warnings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return warnings_;
}

size_t ModelVersion::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queues_[0].size() + queues_[1].size();
}

void ModelVersion::load() {
    try {
        load_session();
    } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        state_ = State::kUnavailable;
        reason_ = e.what();
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // unloaded while loading
    state_ = State::kReady;
    for (Priority cls : {Priority::kRealTime, Priority::kBestEffort})
        for (int i = 0; i < settings_.instances; ++i) workers_.emplace_back(&ModelVersion::worker, this, cls);
}

void ModelVersion::load_session() {
    std::vector<std::string> warnings;
    bool has_file = config_text_.has_value(), max_batch_set = false;
    if (has_file) config_ = parse_model_config(*config_text_, "config.pbtxt", warnings, &max_batch_set);
    // The session options come from the parameters, which need no model.
    std::vector<std::string> ignored;
    ModelSettings early = model_settings(config_, ignored);
    SessionOptions opts;
    opts.threads = ctx_.cores->cores();
    opts.use_global_thread_pools = true;
    opts.preemptible = ctx_.preemption;  // best-effort runs stop within a short kernel iteration
    opts.memory_limit = early.memory_limit;
    opts.kernels = early.kernels;
    std::shared_ptr<Session> session(Session::load(path_, opts));
    ModelSignature sig{session->inputs(), session->outputs(), ends_with(path_, ".kiln")};
    complete_model_config(config_, model_, sig, has_file, max_batch_set, warnings);
    settings_ = model_settings(config_, ignored);
    if (settings_.dynamic_batching) {
        batch_policy_ = batch_policy_no_delay_ = *settings_.dynamic_batching;
        batch_policy_no_delay_.max_queue_delay = std::chrono::microseconds(0);
    }
    session_ = session;
    {
        std::lock_guard<std::mutex> lock(mu_);
        warnings_ = warnings;
    }
    for (const std::string& w : warnings)
        std::fprintf(stderr, "kiln serve: model '%s' version %s: %s\n", model_.c_str(), version_str_.c_str(), w.c_str());
    // Compile the batch sizes the batcher will form: 1, the preferred ones and the largest. Other
    // sizes compile on first use; every size is a specialization of the one session.
    if (settings_.max_batch_size <= 0) return;
    std::string batch_symbol;
    for (const TensorInfo& t : sig.inputs) {
        if (t.symbols.empty() || t.symbols[0].empty()) return;  // a static batch dim: nothing to specialize
        if (batch_symbol.empty()) batch_symbol = t.symbols[0];
        if (t.symbols[0] != batch_symbol) return;  // inputs with different batch symbols: per request
        for (size_t d = 1; d < t.shape.size(); ++d)
            if (t.shape[d] < 0) return;  // other variable dims: compiled per request shape
    }
    std::set<int> sizes;
    if (settings_.dynamic_batching)
        sizes.insert(settings_.dynamic_batching->preferred_batch_sizes.begin(),
                     settings_.dynamic_batching->preferred_batch_sizes.end());
    sizes.insert(1);
    sizes.insert(settings_.max_batch_size);
    for (int b : sizes) session_->specialize({{batch_symbol, b}});
}

void ModelVersion::refresh_metrics() const {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady) return;  // session_ is set before the state turns READY
    }
    ctx_.metrics->session(model_, version_str_, session_->stats());
}

void ModelVersion::stop(bool drain) {
    Batch dropped[2];
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!stopping_) {
            stopping_ = true;
            draining_ = drain;
            if (state_ == State::kReady || state_ == State::kLoading) state_ = State::kUnloading;
        }
        if (!draining_)
            for (int c = 0; c < 2; ++c) dropped[c] = queues_[c].take_all();
        drop_claim_if_unqueued_locked();
        work_cv_.notify_all();
    }
    fail_all(dropped[0], {Code::kUnavailable, "model '" + model_ + "' version " + version_str_ + " was unloaded"});
    fail_all(dropped[1], {Code::kUnavailable, "model '" + model_ + "' version " + version_str_ + " was unloaded"});
    std::vector<std::thread> workers;
    {
        std::lock_guard<std::mutex> lock(mu_);
        workers.swap(workers_);
    }
    for (std::thread& t : workers) t.join();
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kUnavailable) {
        state_ = State::kUnavailable;
        reason_ = "unloaded";
    }
    ctx_.metrics->queue_depth(model_, version_str_, 0);
}

void ModelVersion::infer(InferRequest request, InferCallback done, Clock::time_point arrival) {
    auto r = std::make_unique<PendingRequest>();
    r->arrival = arrival;
    r->done = std::move(done);
    // config_ and session_ are set before the state turns READY (under mu_).
    Failure not_ready;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady || stopping_)
            not_ready = {Code::kUnavailable, "model '" + model_ + "' version " + version_str_ + " is not ready (" +
                                                 state_name(state_) + ")"};
    }
    if (!not_ready.ok()) {
        r->request = std::move(request);
        return finish(*r, not_ready, {});
    }
    Failure bad = validate_request(request, config_, session_->inputs(), *r);
    r->request = std::move(request);
    if (!bad.ok()) return finish(*r, bad, {});
    r->priority = r->request.priority.value_or(settings_.default_priority);
    const int cls = static_cast<int>(r->priority);
    const bool caller_waits = r->request.caller_waits;
    Failure refused;
    Batch inline_batch;
    bool claimed = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady || stopping_) {
            refused = {Code::kUnavailable, "model '" + model_ + "' version " + version_str_ + " is not ready (" +
                                               state_name(state_) + ")"};
        } else if (auto in = queues_[cls].admit(r, settings_.queue[cls], settings_.sla); !in.refused.empty()) {
            refused = {Code::kUnavailable, "model '" + model_ + "' version " + version_str_ + ": the " +
                                               priority_name(static_cast<Priority>(cls)) + " " + in.refused};
        } else {
            if (in.deadline && ctx_.deadline_added) ctx_.deadline_added(*in.deadline);
            const bool rt = cls == static_cast<int>(Priority::kRealTime);
            if (rt) claim_cores_locked();
            if (rt && ctx_.preemption && caller_waits && rt_in_flight_ == 0 && queues_[cls].size() == 1) {
                Clock::time_point wake;
                inline_batch = queues_[cls].take_batch(batch_policy_no_delay_, Clock::now(), wake);
            }
            ctx_.metrics->queue_depth(model_, version_str_, queues_[0].size() + queues_[1].size());
            if (inline_batch.empty()) {
                work_cv_.notify_all();
                return;
            }
            claimed = rt_claimed_;
            rt_claimed_ = false;  // this run takes the claim over, as a worker would
            ++rt_in_flight_;
        }
    }
    if (!inline_batch.empty()) {
        struct InFlight {  // counted down however run_batch leaves
            ModelVersion* v;
            ~InFlight() {
                std::lock_guard<std::mutex> lock(v->mu_);
                --v->rt_in_flight_;
            }
        } in_flight{this};
        run_batch(inline_batch, Priority::kRealTime, claimed);
        return;
    }
    finish(*r, refused, {});
}

std::optional<Clock::time_point> ModelVersion::expire(Clock::time_point now) {
    Batch expired[2];
    std::optional<Clock::time_point> next;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (int c = 0; c < 2; ++c) {
            expired[c] = queues_[c].take_expired(now);
            auto d = queues_[c].next_deadline();
            if (d && (!next || *d < *next)) next = d;
        }
        drop_claim_if_unqueued_locked();
        if (!expired[0].empty() || !expired[1].empty())
            ctx_.metrics->queue_depth(model_, version_str_, queues_[0].size() + queues_[1].size());
    }
    for (auto& batch : expired)
        for (auto& r : batch) {
            auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - r->arrival).count();
            auto allowed = std::chrono::duration_cast<std::chrono::microseconds>(*r->deadline - r->arrival).count();
            finish(*r, {Code::kDeadlineExceeded, "model '" + model_ + "': the request waited " + std::to_string(waited) +
                                                     " us in the queue, past its deadline of " + std::to_string(allowed) + " us"},
                   {});
        }
    return next;
}

void ModelVersion::worker(Priority cls) {
    if (cls == Priority::kBestEffort && ctx_.be_nice > 0) lower_thread_priority(ctx_.be_nice);
    RequestQueue& q = queues_[static_cast<int>(cls)];
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (stopping_ && q.empty()) return;
        // Real-time requests do not wait for a batch to fill; nor does anyone when stopping.
        const bool wait = cls == Priority::kBestEffort && !stopping_;
        Clock::time_point wake = Clock::time_point::max();
        Batch batch = q.take_batch(wait ? batch_policy_ : batch_policy_no_delay_, Clock::now(), wake);
        if (batch.empty()) {
            if (q.empty()) {
                work_cv_.wait(lock);
            } else {
                work_cv_.wait_until(lock, wake);
            }
            continue;
        }
        ctx_.metrics->queue_depth(model_, version_str_, queues_[0].size() + queues_[1].size());
        const bool claimed = cls == Priority::kRealTime && rt_claimed_;
        if (claimed) rt_claimed_ = false;  // this batch's run takes the claim over
        if (cls == Priority::kRealTime) ++rt_in_flight_;
        lock.unlock();
        run_batch(batch, cls, claimed);
        lock.lock();
        if (cls == Priority::kRealTime) --rt_in_flight_;
    }
}

void ModelVersion::claim_cores_locked() {
    if (!ctx_.preemption || rt_claimed_) return;
    rt_claimed_ = true;
    ctx_.cores->claim_for_real_time(settings_.threads);
}

void ModelVersion::drop_claim_if_unqueued_locked() {
    if (!rt_claimed_ || !queues_[static_cast<int>(Priority::kRealTime)].empty()) return;
    rt_claimed_ = false;
    ctx_.cores->unclaim_for_real_time(settings_.threads);
}

// Runs `feed` on cores the core scheduler grants; a preempted best-effort run resumes with the
// same Preemption (on the cores it gets next) until it finishes. `batch` and `queued` are for the
// preemption trace only.
std::vector<Tensor> ModelVersion::run_on_cores(const std::map<std::string, Tensor>& feed, Priority cls,
                                               const Batch& batch, Clock::duration queued, bool& claimed) {
    Preemption preemption;
    RunOptions ro;
    ro.preempt = cls == Priority::kBestEffort ? &preemption : nullptr;
    int preemptions = 0;
    std::optional<Clock::time_point> started;
    for (;;) {
        RunTimes t;
        t.asked = Clock::now();
        CoreScheduler::Grant grant = ctx_.cores->acquire(cls, settings_.threads, ro.preempt, claimed);
        claimed = false;
        t.granted = Clock::now();
        if (!started) started = t.granted;
        ro.max_threads = grant.cores;
        std::vector<Tensor> outs;
        bool suspended = false;
        try {
            outs = session_->run(feed, ro);
            suspended = ro.preempt && outs.empty() && preemption.suspended();
        } catch (...) {
            ctx_.cores->release(grant, false);
            throw;
        }
        t.returned = Clock::now();
        ctx_.cores->release(grant, suspended);
        if (cls == Priority::kRealTime) trace_real_time_run(model_, batch, queued, t);
        if (!suspended) {
            if (preemptions > 0) trace_preempted_run_done(model_, batch, preemptions, *started, t.returned);
            return outs;
        }
        ++preemptions;
        trace_preemption(model_, batch, preemption, grant.cores, t.returned);
    }
}

void ModelVersion::run_batch(Batch& batch, Priority cls, bool claimed) {
    auto start = Clock::now();
    // A run that fails before it acquires (a bad batch, a compile error) gives its claim back.
    struct ClaimGuard {
        CoreScheduler* cores;
        int want;
        bool held;
        ~ClaimGuard() {
            if (held) cores->unclaim_for_real_time(want);
        }
    } claim{ctx_.cores, settings_.threads, claimed};
    for (auto& r : batch) ctx_.metrics->queued(model_, cls, start - r->arrival);
    try {
        const auto& infos = session_->inputs();
        int64_t rows = 0;
        for (auto& r : batch) rows += r->rows;
        std::map<std::string, Tensor> feed;
        for (size_t i = 0; i < infos.size(); ++i) {
            if (batch.size() == 1) {
                feed[infos[i].name] = batch[0]->inputs[i];
            } else {
                std::vector<const Tensor*> parts;
                for (auto& r : batch) parts.push_back(&r->inputs[i]);
                feed[infos[i].name] = concat_rows(parts);
            }
        }
        // A batch size not seen yet compiles here, before cores are granted (as the load's warm-up
        // does); a seen one is a cache lookup.
        session_->specialize(symbol_dims(infos, feed));
        auto inputs_done = Clock::now();

        std::vector<Tensor> outs = run_on_cores(feed, cls, batch, start - batch.front()->arrival, claim.held);
        auto infer_done = Clock::now();
        ctx_.metrics->computed(model_, cls, infer_done - inputs_done);
        ctx_.metrics->batch(model_, rows);

        // Split the outputs back: each request gets its rows of the outputs it asked for.
        const auto& out_infos = session_->outputs();
        std::map<std::string, const Tensor*> by_name;
        for (size_t i = 0; i < out_infos.size() && i < outs.size(); ++i) by_name[out_infos[i].name] = &outs[i];
        std::vector<InferResponse> responses(batch.size());
        for (const auto& o : config_.output()) {
            auto it = by_name.find(o.name());
            if (it == by_name.end())
                throw Error(ErrorKind::kInternal, "model '" + model_ + "' did not produce output '" + o.name() + "'");
            const Tensor& t = *it->second;
            bool batched = settings_.max_batch_size > 0;
            if (batched && (t.shape().empty() || t.shape()[0] != rows))
                throw Error(ErrorKind::kInternal, "model '" + model_ + "' output '" + o.name() + "' has shape " +
                                                      shape_str(t.shape()) + ", expected " + std::to_string(rows) +
                                                      " rows (the batch)");
            int64_t at = 0;
            for (size_t k = 0; k < batch.size(); ++k) {
                const auto& wanted = batch[k]->request.outputs;
                Tensor part = batch.size() == 1 ? t : slice_rows(t, at, batch[k]->rows);
                at += batch[k]->rows;
                if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), o.name()) == wanted.end()) continue;
                if (o.has_reshape()) {
                    Shape s(batched ? 1 : 0, batch[k]->rows);
                    s.insert(s.end(), o.dims().begin(), o.dims().end());
                    part = part.reshaped(s);
                }
                responses[k].outputs.push_back({o.name(), part});
            }
        }
        auto end = Clock::now();
        stats_.execution(rows, inputs_done - start, infer_done - inputs_done, end - infer_done);
        for (size_t k = 0; k < batch.size(); ++k) {
            stats_.success(batch[k]->rows, end - batch[k]->arrival, start - batch[k]->arrival, inputs_done - start,
                           infer_done - inputs_done, end - infer_done);
            finish(*batch[k], Failure::none(), std::move(responses[k]));
        }
    } catch (const Error& e) {
        fail_all(batch, {code_of(e), "model '" + model_ + "' version " + version_str_ + ": " + e.what()});
    } catch (const std::exception& e) {
        fail_all(batch, {Code::kInternal, "model '" + model_ + "' version " + version_str_ + ": " + e.what()});
    }
}

void ModelVersion::fail_all(Batch& batch, const Failure& failure) {
    for (auto& r : batch)
        if (r) finish(*r, failure, {});
    batch.clear();
}

void ModelVersion::finish(PendingRequest& r, Failure failure, InferResponse response) {
    if (!r.done) return;  // answered already (never happens: each request has one owner)
    if (!failure.ok()) stats_.failure(Clock::now() - r.arrival);
    ctx_.metrics->request_done(model_, version_str_, failure.code);
    response.model = model_;
    response.version = version_str_;
    response.id = r.request.id;
    InferCallback done = std::move(r.done);
    r.done = nullptr;
    try {
        done(std::move(failure), std::move(response));
    } catch (...) {
        // A callback that throws must not take the instance thread down.
    }
}

}  // namespace kiln::serve
