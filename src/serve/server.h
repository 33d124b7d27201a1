// serve::Server: the inference server's core, behind every protocol frontend (HTTP/REST in
// http_frontend.h, gRPC in grpc_frontend.h). It owns the model repository (Triton's layout), the
// per-model queues and dynamic batchers, the model instances, the real-time / best-effort core
// scheduler with preemption, and the metrics. Frontends translate KServe v2 messages to and from
// the types below and never touch a model directly.
//
// Every call is thread-safe. infer() answers each request exactly once, through its callback,
// possibly on another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::serve {

/// The outcome classes of the KServe v2 protocol; each frontend maps them to its status codes
/// (HTTP 400/404/503/504/500, gRPC INVALID_ARGUMENT/NOT_FOUND/UNAVAILABLE/DEADLINE_EXCEEDED/...).
enum class Code {
    kOk,
    kInvalidArgument,   // bad shape, dtype, missing or unknown input, malformed request
    kNotFound,          // unknown model or version
    kUnavailable,       // model not ready, queue full (overload), server shutting down
    kDeadlineExceeded,  // the request's timeout passed before it ran
    kCancelled,         // the client went away
    kInternal,          // a bug, or a model that failed at run time
};
const char* code_name(Code code);

/// A failure: the class and a message that says what was wrong (which model, which input,
/// expected vs got).
struct Failure {
    Code code = Code::kOk;
    std::string message;
    bool ok() const { return code == Code::kOk; }
    static Failure none() { return {}; }
};

/// The two priority classes (REEF's real-time and best-effort).
enum class Priority { kRealTime, kBestEffort };

/// Triton's priority level (a request's "priority" parameter, a config's default_priority_level)
/// -> Kiln's class: 1 is real-time, any higher level best effort, 0 = nullopt (the model's default).
std::optional<Priority> priority_from_level(uint64_t level);

/// One named tensor of a request or response. BYTES tensors are DType::kString.
struct NamedTensor {
    std::string name;
    Tensor tensor;
};

struct InferRequest {
    std::string model;
    std::string version;  // "" = the newest ready version
    std::string id;       // echoed in the response ("" = none)
    std::vector<NamedTensor> inputs;
    std::vector<std::string> outputs;  // requested outputs by name; empty = all
    /// Unset: the model's default (config parameter "priority" or Triton's priority levels;
    /// best effort when nothing says otherwise).
    std::optional<Priority> priority;
    /// Unset: the model's default SLA (config parameter "sla_ms"), or none. When it passes
    /// before the request runs, the request is removed from its queue and answered
    /// kDeadlineExceeded.
    std::optional<std::chrono::microseconds> timeout;
    /// The arrival time (set by the frontend when it has parsed the request; defaults to
    /// when infer() was called).
    std::optional<std::chrono::steady_clock::time_point> arrival;
};

struct InferResponse {
    std::string model;
    std::string version;
    std::string id;
    std::vector<NamedTensor> outputs;
};

using InferCallback = std::function<void(Failure, InferResponse)>;

/// A model input or output as the protocol describes it: KServe datatype ("FP32", "INT64",
/// "BYTES", ...) and the shape with -1 for variable dimensions, the batch dimension included
/// when the model batches (max_batch_size > 0).
struct TensorMetadata {
    std::string name;
    std::string datatype;
    std::vector<int64_t> shape;
};

struct ModelMetadata {
    std::string name;
    std::vector<std::string> versions;  // the ready ones
    std::string platform;               // "onnxruntime_onnx" for ONNX models, "kiln" for .kiln
    std::vector<TensorMetadata> inputs;
    std::vector<TensorMetadata> outputs;
};

struct ServerMetadata {
    std::string name = "kiln";
    std::string version;
    std::vector<std::string> extensions;
};

/// One row of the repository index.
struct RepositoryEntry {
    std::string name;
    std::string version;
    std::string state;   // "READY", "LOADING", "UNAVAILABLE", "UNLOADING"
    std::string reason;  // why not ready (a compile error, "unloaded", ...)
};

/// Triton's statistics extension, per model version (durations in ns).
struct DurationStat {
    uint64_t count = 0;
    uint64_t ns = 0;
};
struct BatchStat {
    uint64_t batch_size = 0;
    DurationStat compute_input, compute_infer, compute_output;
};
struct ModelStatistics {
    std::string name;
    std::string version;
    uint64_t last_inference_ms = 0;  // ms since the epoch
    uint64_t inference_count = 0;    // batch rows answered with a result (a request of batch 4 adds 4)
    uint64_t execution_count = 0;    // model executions (a batch is one)
    DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
    std::vector<BatchStat> batch_stats;
};

/// Converts between KServe datatype names and Kiln's dtypes ("FP32" <-> kFloat32, "BYTES" <->
/// kString, "BF16", "BOOL", ...). nullopt for a name or dtype the protocol lacks.
std::optional<DType> dtype_from_kserve(const std::string& datatype);
std::optional<std::string> kserve_datatype(DType dtype);

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
