// The KServe v2 HTTP/REST JSON bodies other than inference: errors and their status codes,
// server and model metadata, the model repository extension (index, load, unload) and Triton's
// statistics extension. (Inference bodies: kserve_infer_request.h, kserve_infer_response.h.)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serve/types.h"

namespace kiln::serve::kserve {

/// The HTTP status of a failure: 400 invalid argument, 404 not found, 503 unavailable, 504
/// deadline exceeded, 500 internal (and anything else).
int http_status(Code code);
/// {"error": "<message>"}
std::string error_json(const std::string& message);

std::string server_metadata_json(const ServerMetadata& m);
std::string model_metadata_json(const ModelMetadata& m);
/// [{"name", "version", "state", "reason"}, ...] (version and reason only when set).
std::string repository_index_json(const std::vector<RepositoryEntry>& entries);
/// {"model_stats": [{name, version, last_inference, inference_count, execution_count,
/// inference_stats {success, fail, queue, compute_input, compute_infer, compute_output,
/// cache_hit}, batch_stats [...]}]}
std::string statistics_json(const std::vector<ModelStatistics>& stats);

/// The body of POST /v2/repository/index: empty, or {"ready": bool}.
Failure parse_repository_index_request(std::string_view body, bool& ready_only);
/// The body of POST .../load and .../unload: empty, or {"parameters": {...}}. A load that
/// overrides the model's config or files is rejected (Kiln loads from the repository only).
Failure parse_repository_load_request(std::string_view body, const std::string& model, bool load);

}  // namespace kiln::serve::kserve
