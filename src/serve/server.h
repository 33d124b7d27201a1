// serve::Server: the inference server's core, behind every protocol frontend (HTTP/REST in
// http_frontend.h, gRPC in grpc_frontend.h). It owns the model repository (Triton's layout), the
// per-model queues and dynamic batchers, the model instances, the real-time / best-effort core
// scheduler with preemption, and the metrics. Frontends translate KServe v2 messages to and from
// the types of serve/types.h and never touch a model directly.
//
// Every call is thread-safe. infer() answers each request exactly once, through its callback,
// possibly on another thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "serve/types.h"

namespace kiln::serve {

struct ServerOptions {
    std::string model_repository;  // DIR/<model>/<version>/model.onnx (or model.kiln)
    /// "none": nothing loads at start (load on request); "all" (default): every model.
    std::string model_control = "all";
    std::vector<std::string> load_models;  // with model_control "explicit": these at start
    /// Whether the repository API may load and unload models (Triton's --model-control-mode
    /// explicit); false under Triton's mode "none", where a load or unload request is refused.
    bool repository_control = true;
    int threads = 0;                       // cores the server may use (0 = all)
    /// BE work fills the cores RT leaves idle (the CPU analogue of REEF's dynamic kernel
    /// padding). Off: BE waits while any RT request runs.
    bool be_padding = true;
    /// Preempt running BE work when RT work arrives (off: RT waits for the running kernel
    /// sequence to finish; for comparison only).
    bool preemption = true;
    /// The OS nice value (1-19) of the threads that run best-effort requests (each model's BE
    /// workers); 0 leaves them at the process's. Real-time requests' threads keep the process's
    /// priority, so the OS runs an RT thread that wakes (a request arriving, cores granted) ahead
    /// of BE work; the intra-op pool's threads, shared by both classes, keep it too.
    int be_nice = 0;
    std::string kernel_cache_dir;  // "" = Kiln's default
};

class Server {
public:
    /// Reads the repository and starts loading models (compiles run in the background;
    /// ready() and model_ready() say when they are done). Throws kiln::Error (kIOError,
    /// kInvalidArgument) for a repository that cannot be read.
    static std::unique_ptr<Server> create(const ServerOptions& opts);
    virtual ~Server() = default;

    // Health.
    virtual bool live() const = 0;
    /// Every model that was asked to load is ready (or failed), and not shutting down.
    virtual bool ready() const = 0;
    virtual bool model_ready(const std::string& name, const std::string& version) const = 0;

    // Metadata and configuration.
    virtual ServerMetadata metadata() const = 0;
    virtual Failure model_metadata(const std::string& name, const std::string& version,
                                   ModelMetadata& out) const = 0;
    /// The model's configuration as Triton's model config JSON (the config.pbtxt fields, with
    /// the defaults Kiln filled in: name, platform, max_batch_size, input, output,
    /// dynamic_batching, instance_group, parameters), serialized with JSON field names as in
    /// config.pbtxt. The gRPC frontend parses it into its ModelConfig message.
    virtual Failure model_config_json(const std::string& name, const std::string& version,
                                      std::string& out) const = 0;

    // Inference.
    /// Queues the request; `done` is called exactly once with the result or the failure.
    /// Invalid requests (unknown model, bad input) are answered before infer() returns.
    virtual void infer(InferRequest request, InferCallback done) = 0;

    // Model repository extension.
    virtual std::vector<RepositoryEntry> repository_index(bool ready_only) const = 0;
    /// Loads (or reloads) a model; returns when it is ready or failed (its compile error).
    virtual Failure load_model(const std::string& name) = 0;
    /// Unloads a model: queued requests are answered kUnavailable, running ones finish.
    virtual Failure unload_model(const std::string& name) = 0;

    // Statistics extension ("" name = every model).
    virtual Failure statistics(const std::string& name, const std::string& version,
                               std::vector<ModelStatistics>& out) const = 0;

    /// Prometheus text exposition format (version 0.0.4): request counts by outcome, queue and
    /// compute time histograms per model and priority, batch sizes, preemptions and preemption
    /// latency, memory in use.
    virtual std::string metrics_text() const = 0;

    /// Graceful shutdown: new requests get kUnavailable, queued and running ones finish, then
    /// returns. Idempotent.
    virtual void shutdown() = 0;
};

}  // namespace kiln::serve
