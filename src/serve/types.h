// The inference server's vocabulary: the requests, responses, failures, metadata and statistics
// that serve::Server (server.h), its protocol frontends and its parts (queues, batcher, metrics,
// configuration) exchange. No behaviour lives here.
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
    /// The caller blocks until the answer anyway (the HTTP frontend's handler thread): a
    /// real-time request may then run on the caller's thread instead of waking the model's
    /// worker (ModelVersion::infer).
    bool caller_waits = false;
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

}  // namespace kiln::serve
