// ModelVersion: one loaded version of a model -- its completed config, its session, its two
// request queues (real-time, best effort), and the instance threads that form batches and run
// them on cores from the CoreScheduler.
//
// Each priority class has `instance_group count` threads (so a real-time request never waits
// for an instance that a best-effort batch holds). A thread takes a batch (request_queue.h;
// real-time batches go without the queue delay), acquires cores, runs, and on preemption gives
// the cores back and acquires again with the same Preemption: the batch resumes. Every request
// is answered exactly once: with its rows of the outputs, with the run's error, kUnavailable
// (queue full, unloaded), or kDeadlineExceeded (its deadline passed while queued).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serve/core_scheduler.h"
#include "serve/model_config.h"
#include "serve/model_statistics.h"
#include "serve/request_queue.h"
#include "serve/server_metrics.h"

namespace kiln::serve {

/// What every version shares: the server's cores, metrics and session options.
struct ServingContext {
    CoreScheduler* cores = nullptr;
    ServerMetrics* metrics = nullptr;
    /// Told when a request with a deadline is queued (the server's deadline reaper wakes for it).
    std::function<void(Clock::time_point)> deadline_added;
    int be_nice = 0;  // ServerOptions::be_nice
    bool preemption = true;  // ServerOptions::preemption: sessions compile preemptible kernels
};

class ModelVersion {
public:
    enum class State { kLoading, kReady, kUnavailable, kUnloading };
    static const char* state_name(State s);

    /// `config_text`: the model's config.pbtxt, if it has one.
    ModelVersion(std::string model, int64_t version, std::string path, std::optional<std::string> config_text,
                 ServingContext ctx);
    ~ModelVersion();
    ModelVersion(const ModelVersion&) = delete;
    ModelVersion& operator=(const ModelVersion&) = delete;

    /// Loads and compiles (blocking), then starts the instance threads. A failure leaves the
    /// version UNAVAILABLE with the error as its reason.
    void load();
    /// Stops: drain = finish every queued request first; otherwise queued requests are answered
    /// kUnavailable. Running batches finish either way. Blocks until the threads are done.
    void stop(bool drain);

    const std::string& model() const { return model_; }
    const std::string& version() const { return version_str_; }
    int64_t version_number() const { return version_; }
    State state() const;
    std::string reason() const;
    std::vector<std::string> warnings() const;
    /// Valid once ready.
    const inference::ModelConfig& config() const { return config_; }
    const ModelSettings& settings() const { return settings_; }
    const std::vector<TensorInfo>& model_inputs() const { return session_->inputs(); }
    /// Sets the version's session gauges (specializations held, weight and constant bytes) in
    /// the server's metrics; nothing before the version is ready.
    void refresh_metrics() const;

    /// Validates and queues the request; answers it (before returning) when it cannot be queued.
    /// A real-time request whose caller waits for the answer anyway (InferRequest::caller_waits)
    /// runs on the caller's thread when preemption is on and no other real-time request of this
    /// version is queued or running: the thread that asked best-effort runs to stop goes straight
    /// to waiting for their cores, where waking the worker first took 50-140 us of a core those
    /// runs needed to finish their chunks.
    void infer(InferRequest request, InferCallback done, Clock::time_point arrival);
    /// Answers the queued requests whose deadline passed; returns the next deadline.
    std::optional<Clock::time_point> expire(Clock::time_point now);
    ModelStatistics statistics() const { return stats_.snapshot(); }
    size_t queued() const;

private:
    void load_session();
    void worker(Priority cls);
    /// `claimed`: the batch takes over the version's claim on the cores (CoreScheduler::
    /// claim_for_real_time); the run's acquire consumes it, and it is dropped if the run fails first.
    void run_batch(Batch& batch, Priority cls, bool claimed);
    std::vector<Tensor> run_on_cores(const std::map<std::string, Tensor>& feed, Priority cls, const Batch& batch,
                                     Clock::duration queued, bool& claimed);
    /// Under mu_: claims cores for the RT queue's next run if none is claimed (preemption on).
    void claim_cores_locked();
    /// Under mu_: drops the claim when the RT queue emptied without a run taking it.
    void drop_claim_if_unqueued_locked();
    void finish(PendingRequest& r, Failure failure, InferResponse response);
    void fail_all(Batch& batch, const Failure& failure);

    const std::string model_;
    const int64_t version_;
    const std::string version_str_, path_;
    const std::optional<std::string> config_text_;
    ServingContext ctx_;
    ModelStatisticsRecorder stats_;

    inference::ModelConfig config_;
    ModelSettings settings_;
    /// The batcher's policies, from settings_ once (default: each request alone): as configured,
    /// and without the delay (real-time requests, stopping).
    BatchPolicy batch_policy_, batch_policy_no_delay_;
    // One session whatever the batch sizes: it holds a compiled specialization per batch size
    // seen (SessionOptions::max_specializations of them), all sharing one copy of the weights.
    std::shared_ptr<Session> session_;

    mutable std::mutex mu_;
    std::condition_variable work_cv_;
    State state_ = State::kLoading;
    std::string reason_;
    std::vector<std::string> warnings_;
    bool stopping_ = false, draining_ = false;
    RequestQueue queues_[2];  // by Priority
    // Whether the version holds a claim on cores for its next real-time run (at most one: with
    // several instances the others acquire as usual). Set when an RT request is queued, taken
    // over by the worker that takes the next RT batch.
    bool rt_claimed_ = false;
    // Real-time batches running now, on the workers or inline on a caller's thread (infer).
    int rt_in_flight_ = 0;
    std::vector<std::thread> workers_;
};

}  // namespace kiln::serve
