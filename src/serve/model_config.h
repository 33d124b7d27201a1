// A model's configuration: Triton's config.pbtxt (serve/proto/model_config.proto) read with
// protobuf's text parser, completed from the model where it leaves things out (Triton's
// auto-complete), checked against the model, and turned into the settings the scheduler uses.
//
// Defaults when there is no config.pbtxt (or it does not set the field):
//   name            the model's directory name
//   platform        "onnxruntime_onnx" (a .onnx model) or "kiln" (a .kiln artifact)
//   input / output  the model's, dims without the batch dimension when batching, -1 = variable
//   max_batch_size  kDefaultMaxBatchSize (with dynamic_batching {}) when every input and output
//                   has a variable first dimension, else 0 (no batching); a config that writes
//                   max_batch_size (0 included) is honoured
//   instance_group  one CPU instance
// Kiln's own parameters (config `parameters { key: K value { string_value: V } }`):
//   priority         "realtime" | "best_effort": the class of requests that do not say
//   sla_ms           a default per-request deadline in ms (queued longer -> kDeadlineExceeded)
//   memory_limit_mb  SessionOptions::memory_limit of the model's sessions
//   threads          cores one run of the model uses (default: all the server's)
//   kernels          "generated" | "dnnl" | "auto" (SessionOptions::kernels)
// Triton's priority levels map onto the two classes: level 1 is real-time, any higher level is
// best effort, 0 or unset is the model's default (its "priority" parameter, else
// dynamic_batching.default_priority_level, else best effort).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "model_config.pb.h"
#include "serve/request_queue.h"
#include "serve/types.h"

namespace kiln::serve {

/// max_batch_size when auto-complete finds a model that batches (variable first dimensions).
constexpr int kDefaultMaxBatchSize = 8;

/// Parses the text of a config.pbtxt. Fields Kiln does not know are skipped and reported in
/// `warnings` ("config.pbtxt:12: field 'optimization' is not used by Kiln"); a syntax error or a
/// bad value throws kiln::Error (kInvalidArgument) with the line. `max_batch_size_set` says
/// whether the text wrote max_batch_size (proto3 cannot tell 0 from unset).
inference::ModelConfig parse_model_config(const std::string& text, const std::string& file_name,
                                          std::vector<std::string>& warnings,
                                          bool* max_batch_size_set = nullptr);

/// What auto-complete and the checks need to know about the model.
struct ModelSignature {
    std::vector<TensorInfo> inputs, outputs;
    bool artifact = false;  // a compiled .kiln file
};

/// Fills what `config` leaves out from the model and checks what it gives against it; throws
/// kiln::Error (kInvalidArgument) naming the field, expected vs got. `has_file`: the config came
/// from a config.pbtxt (false: everything is auto-completed).
void complete_model_config(inference::ModelConfig& config, const std::string& model_name,
                           const ModelSignature& model, bool has_file, bool max_batch_size_set,
                           std::vector<std::string>& warnings);

/// The settings the server runs a completed config with.
struct ModelSettings {
    int max_batch_size = 0;  // 0 = no batching: each request runs alone with its full shape
    /// The dynamic batcher's policy for best-effort requests (real-time ones are batched to the
    /// same sizes without the delay); nullopt without dynamic_batching: each request runs alone.
    std::optional<BatchPolicy> dynamic_batching;
    int instances = 1;  // concurrent runs per priority class
    Priority default_priority = Priority::kBestEffort;
    QueuePolicy queue[2];  // by Priority
    std::optional<std::chrono::microseconds> sla;
    size_t memory_limit = 0;
    int threads = 0;  // cores per run; 0 = all the server's
    std::string kernels = "auto";
};

/// Reads the settings from a completed config; throws kiln::Error (kInvalidArgument) for a bad
/// parameter value, naming it. Unknown parameters are reported in `warnings`.
ModelSettings model_settings(const inference::ModelConfig& config, std::vector<std::string>& warnings);


/// DataType (config) <-> DType; TYPE_INVALID for a dtype the config cannot name.
inference::DataType config_data_type(DType dtype);
std::optional<DType> dtype_from_config(inference::DataType type);

/// The config as Triton's model configuration JSON (field names as in config.pbtxt, every field
/// printed, 64-bit integers as numbers).
std::string model_config_to_json(const inference::ModelConfig& config);

}  // namespace kiln::serve
