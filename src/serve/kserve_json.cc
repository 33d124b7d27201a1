// KServe v2 JSON bodies other than inference (see the header). Objects are written with their
// keys in the protocol documents' order (ordered_json).
#include "serve/kserve_json.h"

#include <nlohmann/json.hpp>

namespace kiln::serve::kserve {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

std::string dump(const ojson& j) {
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ojson tensors_json(const std::vector<TensorMetadata>& tensors) {
    ojson a = ojson::array();
    for (const TensorMetadata& t : tensors)
        a.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
    return a;
}

ojson duration_json(const DurationStat& d) {
    return {{"count", d.count}, {"ns", d.ns}};
}

/// An optional JSON object body; empty or whitespace means {}.
Failure parse_object(std::string_view body, const std::string& what, json& out) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        out = json::object();
        return Failure::none();
    }
    out = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded()) return {Code::kInvalidArgument, "malformed JSON in the " + what + " request"};
    if (!out.is_object()) return {Code::kInvalidArgument, "the " + what + " request must be a JSON object"};
    return Failure::none();
}

}  // namespace

int http_status(Code code) {
    switch (code) {
        case Code::kOk: return 200;
        case Code::kInvalidArgument: return 400;
        case Code::kNotFound: return 404;
        case Code::kUnavailable: return 503;
        case Code::kDeadlineExceeded: return 504;
        case Code::kCancelled: return 499;  // nginx's "client closed request": nobody reads it anyway
        case Code::kInternal: return 500;
    }
    return 500;
}

std::string error_json(const std::string& message) {
    return dump(ojson{{"error", message}});
}

std::string server_metadata_json(const ServerMetadata& m) {
    return dump(ojson{{"name", m.name}, {"version", m.version}, {"extensions", m.extensions}});
}

std::string model_metadata_json(const ModelMetadata& m) {
    return dump(ojson{{"name", m.name},
                      {"versions", m.versions},
                      {"platform", m.platform},
                      {"inputs", tensors_json(m.inputs)},
                      {"outputs", tensors_json(m.outputs)}});
}

std::string repository_index_json(const std::vector<RepositoryEntry>& entries) {
    ojson a = ojson::array();
    for (const RepositoryEntry& e : entries) {
        ojson row{{"name", e.name}};
        if (!e.version.empty()) row["version"] = e.version;
        row["state"] = e.state;
        if (!e.reason.empty()) row["reason"] = e.reason;
        a.push_back(std::move(row));
    }
    return dump(a);
}

std::string statistics_json(const std::vector<ModelStatistics>& stats) {
    ojson models = ojson::array();
    for (const ModelStatistics& s : stats) {
        ojson batches = ojson::array();
        for (const BatchStat& b : s.batch_stats)
            batches.push_back({{"batch_size", b.batch_size},
                               {"compute_input", duration_json(b.compute_input)},
                               {"compute_infer", duration_json(b.compute_infer)},
                               {"compute_output", duration_json(b.compute_output)}});
        models.push_back({{"name", s.name},
                          {"version", s.version},
                          {"last_inference", s.last_inference_ms},
                          {"inference_count", s.inference_count},
                          {"execution_count", s.execution_count},
                          {"inference_stats",
                           {{"success", duration_json(s.success)},
                            {"fail", duration_json(s.fail)},
                            {"queue", duration_json(s.queue)},
                            {"compute_input", duration_json(s.compute_input)},
                            {"compute_infer", duration_json(s.compute_infer)},
                            {"compute_output", duration_json(s.compute_output)},
                            {"cache_hit", duration_json({})}}},
                          {"batch_stats", std::move(batches)}});
    }
    return dump(ojson{{"model_stats", std::move(models)}});
}

Failure parse_repository_index_request(std::string_view body, bool& ready_only) {
    json req;
    if (Failure f = parse_object(body, "repository index", req); !f.ok()) return f;
    ready_only = false;
    if (auto it = req.find("ready"); it != req.end()) {
        if (!it->is_boolean()) return {Code::kInvalidArgument, "repository index: \"ready\" must be a boolean"};
        ready_only = it->get<bool>();
    }
    return Failure::none();
}

Failure parse_repository_load_request(std::string_view body, const std::string& model, bool load) {
    json req;
    if (Failure f = parse_object(body, load ? "load" : "unload", req); !f.ok()) return f;
    auto params = req.find("parameters");
    if (params == req.end()) return Failure::none();
    if (!params->is_object())
        return {Code::kInvalidArgument,
                std::string(load ? "load" : "unload") + " of model '" + model + "': \"parameters\" must be an object"};
    if (!load) return Failure::none();  // unload_dependents: Kiln has no ensembles, nothing depends
    for (const auto& [key, value] : params->items())
        if (key == "config" || key.rfind("file:", 0) == 0)
            return {Code::kInvalidArgument, "load of model '" + model + "': parameter \"" + key +
                                                "\" (overriding the model's config or files) is not supported; "
                                                "Kiln loads models from the repository only"};
    return Failure::none();
}

}  // namespace kiln::serve::kserve
