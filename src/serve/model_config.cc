// config.pbtxt: parse (protobuf text format, unknown fields reported), auto-complete from the
// model, check against the model, read Kiln's settings. See model_config.h for the defaults.
#include "serve/model_config.h"

#include <algorithm>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kiln/error.h"

namespace kiln::serve {
namespace {

using inference::ModelConfig;
namespace pb = google::protobuf;

/// Collects the text parser's errors and warnings with 1-based line numbers.
class ConfigErrors : public pb::io::ErrorCollector {
public:
    explicit ConfigErrors(std::string file) : file_(std::move(file)) {}
    void AddError(int line, pb::io::ColumnNumber, const std::string& message) override {
        errors.push_back(file_ + ":" + std::to_string(line + 1) + ": " + message);
    }
    void AddWarning(int line, pb::io::ColumnNumber, const std::string& message) override {
        // The parser warns "Message type \"inference.X\" has no field named \"f\"." for each
        // unknown field it skips; say it in our words.
        std::string where = file_ + ":" + std::to_string(line + 1) + ": ";
        size_t at = message.find("has no field named \"");
        if (at == std::string::npos) {
            warnings.push_back(where + message);
            return;
        }
        size_t begin = at + 20, end = message.find('"', begin);
        warnings.push_back(where + "field '" + message.substr(begin, end - begin) + "' is not used by Kiln");
    }
    std::vector<std::string> errors, warnings;

private:
    std::string file_;
};

std::string dims_str(const pb::RepeatedField<int64_t>& dims) {
    std::string s = "[";
    for (int i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
}

/// The model's dims as the config writes them: -1 for variable, the batch dim dropped.
std::vector<int64_t> config_dims(const TensorInfo& t, bool batching) {
    std::vector<int64_t> d(t.shape.begin() + (batching && !t.shape.empty() ? 1 : 0), t.shape.end());
    for (int64_t& x : d) x = x < 0 ? -1 : x;
    return d;
}

std::string shape_of(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
}

const TensorInfo* find_info(const std::vector<TensorInfo>& infos, const std::string& name) {
    for (const TensorInfo& t : infos)
        if (t.name == name) return &t;
    return nullptr;
}

std::string names_of(const std::vector<TensorInfo>& infos) {
    std::string s;
    for (const TensorInfo& t : infos) s += (s.empty() ? "" : ", ") + t.name;
    return s;
}

/// Checks a config tensor (input or output) against the model's; fills data_type/dims when unset.
template <typename ConfigTensor>
void check_tensor(ConfigTensor& c, const TensorInfo& m, const char* what, bool batching) {
    inference::DataType want = config_data_type(m.dtype);
    if (c.data_type() == inference::TYPE_INVALID) c.set_data_type(want);
    KILN_CHECK(c.data_type() == want, kInvalidArgument)
        << what << " '" << c.name() << "': data_type " << inference::DataType_Name(c.data_type())
        << " in the config, the model's is " << inference::DataType_Name(want);
    std::vector<int64_t> model_dims = config_dims(m, batching);
    if (c.dims().empty() && !c.has_reshape()) {
        for (int64_t d : model_dims) c.add_dims(d);
        return;
    }
    for (int64_t d : c.dims())
        KILN_CHECK(d == -1 || d > 0, kInvalidArgument)
            << what << " '" << c.name() << "': dims " << dims_str(c.dims()) << " has " << d
            << " (a dimension is -1 for variable, or positive)";
    // With a reshape, the model sees the reshape; the request carries dims.
    const auto& seen = c.has_reshape() ? c.reshape().shape() : c.dims();
    if (c.has_reshape()) {
        for (int64_t d : c.dims())
            KILN_CHECK(d > 0, kInvalidArgument)
                << what << " '" << c.name() << "': reshape needs fixed dims, got dims " << dims_str(c.dims());
        int64_t a = 1, b = 1;
        for (int64_t d : c.dims()) a *= d;
        for (int64_t d : c.reshape().shape()) b *= d;
        KILN_CHECK(a == b && b > 0, kInvalidArgument)
            << what << " '" << c.name() << "': reshape " << dims_str(c.reshape().shape()) << " has " << b
            << " elements, dims " << dims_str(c.dims()) << " has " << a;
    }
    bool ok = static_cast<size_t>(seen.size()) == model_dims.size();
    for (int i = 0; ok && i < seen.size(); ++i)
        ok = seen[i] == -1 || model_dims[i] == -1 || seen[i] == model_dims[i];
    KILN_CHECK(ok, kInvalidArgument)
        << what << " '" << c.name() << "': " << (c.has_reshape() ? "reshape " : "dims ") << dims_str(seen)
        << " in the config, the model's " << (batching ? "(without the batch dimension) " : "") << "are "
        << shape_of(model_dims);
}

bool batchable(const std::vector<TensorInfo>& infos) {
    for (const TensorInfo& t : infos)
        if (t.shape.empty() || t.shape[0] >= 0) return false;
    return true;
}

const TensorInfo* first_fixed(const std::vector<TensorInfo>& infos) {
    for (const TensorInfo& t : infos)
        if (t.shape.empty() || t.shape[0] >= 0) return &t;
    return nullptr;
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& file_name,
                               std::vector<std::string>& warnings, bool* max_batch_size_set) {
    ModelConfig config;
    ConfigErrors errors(file_name);
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    parser.AllowUnknownField(true);
    pb::TextFormat::ParseInfoTree where;
    parser.WriteLocationsTo(&where);
    bool parsed = parser.ParseFromString(text, &config);
    warnings.insert(warnings.end(), errors.warnings.begin(), errors.warnings.end());
    if (!parsed || !errors.errors.empty()) {
        std::string all;
        for (const std::string& e : errors.errors) all += (all.empty() ? "" : "; ") + e;
        KILN_THROW(kInvalidArgument) << "cannot parse " << (all.empty() ? file_name : all);
    }
    if (max_batch_size_set) {
        const pb::FieldDescriptor* f = ModelConfig::descriptor()->FindFieldByName("max_batch_size");
        *max_batch_size_set = where.GetLocation(f, -1).line >= 0;
    }
    return config;
}

namespace {

/// Triton fields the proto parses but Kiln does not act on: each set to a non-default value is a
/// warning (shown in the repository index and the log), never silently dropped.
void report_unused_fields(const ModelConfig& config, std::vector<std::string>& warnings) {
    auto unused = [&](const std::string& field) { warnings.push_back("field '" + field + "' is not used by Kiln"); };
    for (const auto& in : config.input()) {
        const std::string at = "input '" + in.name() + "' ";
        if (in.allow_ragged_batch()) unused(at + "allow_ragged_batch");
        if (in.is_shape_tensor()) unused(at + "is_shape_tensor");
        if (in.format() != inference::ModelInput::FORMAT_NONE) unused(at + "format");
    }
    for (const auto& out : config.output()) {
        const std::string at = "output '" + out.name() + "' ";
        if (out.is_shape_tensor()) unused(at + "is_shape_tensor");
        if (!out.label_filename().empty()) unused(at + "label_filename");
    }
    if (!config.runtime().empty()) unused("runtime");
    if (!config.cc_model_filenames().empty()) unused("cc_model_filenames");
    if (!config.metric_tags().empty()) unused("metric_tags");
    for (const auto& g : config.instance_group()) {
        if (!g.name().empty()) unused("instance_group name");
        if (g.kind() == inference::ModelInstanceGroup::KIND_MODEL) unused("instance_group kind KIND_MODEL");
    }
    if (!config.has_dynamic_batching()) return;
    const auto& db = config.dynamic_batching();
    if (db.preserve_ordering()) unused("dynamic_batching.preserve_ordering");
    auto delay = [&](const inference::ModelQueuePolicy& q, const std::string& where) {
        if (q.timeout_action() == inference::ModelQueuePolicy::DELAY && q.default_timeout_microseconds() > 0)
            warnings.push_back(where + ".timeout_action DELAY: Kiln keeps such requests queued with no deadline");
    };
    if (db.has_default_queue_policy()) delay(db.default_queue_policy(), "dynamic_batching.default_queue_policy");
    for (const auto& [level, q] : db.priority_queue_policy()) {
        const std::string where = "dynamic_batching.priority_queue_policy[" + std::to_string(level) + "]";
        delay(q, where);
        // Kiln has two classes: level 1 real-time, every level from 2 on one best-effort queue.
        if (level > 2)
            warnings.push_back(where + " is not applied: Kiln serves level 1 as real-time and every level from 2 on as "
                                       "one best-effort queue, with priority_queue_policy[2] (or default_queue_policy)");
    }
}

}  // namespace

void complete_model_config(ModelConfig& config, const std::string& model_name, const ModelSignature& model,
                           bool has_file, bool max_batch_size_set, std::vector<std::string>& warnings) {
    if (config.name().empty()) config.set_name(model_name);
    KILN_CHECK(config.name() == model_name, kInvalidArgument)
        << "name '" << config.name() << "' in the config differs from the model's directory name '" << model_name << "'";
    std::string kind = model.artifact ? "kiln" : "onnxruntime_onnx";
    if (config.platform().empty() && config.backend().empty()) config.set_platform(kind);
    KILN_CHECK(config.platform().empty() || config.platform() == "onnxruntime_onnx" || config.platform() == "kiln",
               kInvalidArgument)
        << "platform '" << config.platform() << "' is not served by Kiln (it serves onnxruntime_onnx and kiln models)";
    KILN_CHECK(config.backend().empty() || config.backend() == "onnxruntime" || config.backend() == "kiln",
               kInvalidArgument)
        << "backend '" << config.backend() << "' is not served by Kiln (it serves onnxruntime and kiln models)";
    if (config.platform().empty()) config.set_platform(kind);

    bool can_batch = batchable(model.inputs) && batchable(model.outputs);
    if (!has_file || !max_batch_size_set) {
        if (can_batch && config.max_batch_size() == 0) {
            config.set_max_batch_size(kDefaultMaxBatchSize);
            if (!config.has_dynamic_batching()) config.mutable_dynamic_batching();
        }
    }
    KILN_CHECK(config.max_batch_size() >= 0, kInvalidArgument)
        << "max_batch_size " << config.max_batch_size() << " is negative";
    bool batching = config.max_batch_size() > 0;
    if (batching && !can_batch) {
        const TensorInfo* t = first_fixed(model.inputs);
        if (!t) t = first_fixed(model.outputs);
        KILN_THROW(kInvalidArgument) << "max_batch_size " << config.max_batch_size()
                                     << " needs a variable first (batch) dimension in every input and output, but '"
                                     << t->name << "' has shape " << shape_of(t->shape) << " (set max_batch_size: 0)";
    }

    if (config.input().empty()) {
        for (const TensorInfo& t : model.inputs) config.add_input()->set_name(t.name);
    }
    std::set<std::string> seen;
    for (auto& in : *config.mutable_input()) {
        const TensorInfo* m = find_info(model.inputs, in.name());
        KILN_CHECK(m, kInvalidArgument) << "input '" << in.name() << "' in the config is not an input of the model (its inputs: "
                                        << names_of(model.inputs) << ")";
        KILN_CHECK(seen.insert(in.name()).second, kInvalidArgument) << "input '" << in.name() << "' is listed twice";
        check_tensor(in, *m, "input", batching);
    }
    for (const TensorInfo& t : model.inputs)
        KILN_CHECK(seen.count(t.name), kInvalidArgument) << "model input '" << t.name << "' is missing from the config's input list";
    // The config may list a subset of the outputs (Triton's rule); those are the ones served.
    if (config.output().empty()) {
        for (const TensorInfo& t : model.outputs) config.add_output()->set_name(t.name);
    }
    seen.clear();
    for (auto& out : *config.mutable_output()) {
        const TensorInfo* m = find_info(model.outputs, out.name());
        KILN_CHECK(m, kInvalidArgument) << "output '" << out.name() << "' in the config is not an output of the model (its outputs: "
                                        << names_of(model.outputs) << ")";
        KILN_CHECK(seen.insert(out.name()).second, kInvalidArgument) << "output '" << out.name() << "' is listed twice";
        check_tensor(out, *m, "output", batching);
    }

    if (config.instance_group().empty()) {
        auto* g = config.add_instance_group();
        g->set_count(1);
        g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    }
    for (auto& g : *config.mutable_instance_group()) {
        KILN_CHECK(g.kind() != inference::ModelInstanceGroup::KIND_GPU && g.gpus().empty(), kInvalidArgument)
            << "instance_group: GPU instances are not supported (Kiln serves on CPU cores)";
        KILN_CHECK(g.count() >= 0, kInvalidArgument) << "instance_group count " << g.count() << " is negative";
        if (g.count() == 0) g.set_count(1);
        if (g.kind() == inference::ModelInstanceGroup::KIND_AUTO) g.set_kind(inference::ModelInstanceGroup::KIND_CPU);
    }
    if (!config.has_version_policy()) config.mutable_version_policy()->mutable_latest()->set_num_versions(1);
    if (config.version_policy().has_latest()) {
        KILN_CHECK(config.version_policy().latest().num_versions() > 0, kInvalidArgument)
            << "version_policy latest: num_versions must be at least 1";
    }

    if (config.has_dynamic_batching()) {
        const auto& db = config.dynamic_batching();
        if (!batching) warnings.push_back("dynamic_batching is ignored: max_batch_size is 0 (the model does not batch)");
        for (int b : db.preferred_batch_size()) {
            KILN_CHECK(b >= 1 && (!batching || b <= config.max_batch_size()), kInvalidArgument)
                << "dynamic_batching.preferred_batch_size " << b << " is outside 1.." << config.max_batch_size()
                << " (max_batch_size)";
        }
        const uint32_t top_level = db.priority_levels() > 0 ? db.priority_levels() : 2;  // 0: Kiln's two classes
        for (const auto& [level, q] : db.priority_queue_policy())
            KILN_CHECK(level >= 1 && level <= top_level, kInvalidArgument)
                << "dynamic_batching.priority_queue_policy has level " << level << ", outside 1.." << top_level
                << (db.priority_levels() > 0 ? " (priority_levels)" : " (priority_levels is 0: Kiln's two classes)");
        if (db.priority_levels() > 0) {
            KILN_CHECK(db.default_priority_level() >= 1 && db.default_priority_level() <= db.priority_levels(), kInvalidArgument)
                << "dynamic_batching.default_priority_level " << db.default_priority_level() << " is outside 1.."
                << db.priority_levels() << " (priority_levels)";
        }
    }
    (void)model_settings(config, warnings);  // checks the parameters' values
    report_unused_fields(config, warnings);
}

namespace {

QueuePolicy queue_policy(const inference::ModelQueuePolicy& p) {
    QueuePolicy q;
    q.max_queue_size = p.max_queue_size();
    // DELAY keeps a timed-out request waiting (Triton lowers its priority): no deadline here.
    if (p.default_timeout_microseconds() > 0 && p.timeout_action() == inference::ModelQueuePolicy::REJECT)
        q.default_timeout = std::chrono::microseconds(p.default_timeout_microseconds());
    q.allow_timeout_override = p.allow_timeout_override() || p.default_timeout_microseconds() == 0;
    return q;
}

int64_t positive_number(const std::string& key, const std::string& value) {
    size_t used = 0;
    int64_t v = -1;
    try {
        v = std::stoll(value, &used);
    } catch (const std::exception&) {
    }
    KILN_CHECK(used == value.size() && v > 0, kInvalidArgument)
        << "parameter '" << key << "': expected a positive integer, got '" << value << "'";
    return v;
}

}  // namespace

ModelSettings model_settings(const ModelConfig& config, std::vector<std::string>& warnings) {
    ModelSettings s;
    s.max_batch_size = config.max_batch_size();
    s.instances = 0;
    for (const auto& g : config.instance_group()) s.instances += std::max(1, g.count());
    s.instances = std::max(1, s.instances);
    if (config.has_dynamic_batching()) {
        const auto& db = config.dynamic_batching();
        if (s.max_batch_size > 0) {
            BatchPolicy& b = s.dynamic_batching.emplace();
            b.max_batch_size = s.max_batch_size;
            b.preferred_batch_sizes.assign(db.preferred_batch_size().begin(), db.preferred_batch_size().end());
            std::sort(b.preferred_batch_sizes.begin(), b.preferred_batch_sizes.end());
            b.max_queue_delay = std::chrono::microseconds(db.max_queue_delay_microseconds());
        }
        s.queue[0] = s.queue[1] = queue_policy(db.default_queue_policy());
        if (auto it = db.priority_queue_policy().find(1); it != db.priority_queue_policy().end())
            s.queue[static_cast<int>(Priority::kRealTime)] = queue_policy(it->second);
        if (auto it = db.priority_queue_policy().find(2); it != db.priority_queue_policy().end())
            s.queue[static_cast<int>(Priority::kBestEffort)] = queue_policy(it->second);
        if (db.priority_levels() > 0 && db.default_priority_level() > 0)
            s.default_priority = *priority_from_level(db.default_priority_level());
    }
    for (const auto& [key, param] : config.parameters()) {
        const std::string& v = param.string_value();
        if (key == "priority") {
            KILN_CHECK(v == "realtime" || v == "best_effort", kInvalidArgument)
                << "parameter 'priority': expected 'realtime' or 'best_effort', got '" << v << "'";
            s.default_priority = v == "realtime" ? Priority::kRealTime : Priority::kBestEffort;
        } else if (key == "sla_ms") {
            s.sla = std::chrono::milliseconds(positive_number(key, v));
        } else if (key == "memory_limit_mb") {
            s.memory_limit = static_cast<size_t>(positive_number(key, v)) << 20;
        } else if (key == "threads") {
            s.threads = static_cast<int>(positive_number(key, v));
        } else if (key == "kernels") {
            KILN_CHECK(v == "generated" || v == "dnnl" || v == "auto", kInvalidArgument)
                << "parameter 'kernels': expected 'generated', 'dnnl' or 'auto', got '" << v << "'";
            s.kernels = v;
        } else {
            warnings.push_back("parameter '" + key + "' is not used by Kiln");
        }
    }
    return s;
}

inference::DataType config_data_type(DType dtype) {
    switch (dtype) {
        case DType::kBool: return inference::TYPE_BOOL;
        case DType::kUInt8: return inference::TYPE_UINT8;
        case DType::kUInt16: return inference::TYPE_UINT16;
        case DType::kUInt32: return inference::TYPE_UINT32;
        case DType::kUInt64: return inference::TYPE_UINT64;
        case DType::kInt8: return inference::TYPE_INT8;
        case DType::kInt16: return inference::TYPE_INT16;
        case DType::kInt32: return inference::TYPE_INT32;
        case DType::kInt64: return inference::TYPE_INT64;
        case DType::kFloat16: return inference::TYPE_FP16;
        case DType::kFloat32: return inference::TYPE_FP32;
        case DType::kFloat64: return inference::TYPE_FP64;
        case DType::kString: return inference::TYPE_STRING;
        case DType::kBFloat16: return inference::TYPE_BF16;
        default: return inference::TYPE_INVALID;
    }
}

std::optional<DType> dtype_from_config(inference::DataType type) {
    static const DType all[] = {DType::kBool,  DType::kUInt8,   DType::kUInt16,  DType::kUInt32, DType::kUInt64,
                                DType::kInt8,  DType::kInt16,   DType::kInt32,   DType::kInt64,  DType::kFloat16,
                                DType::kFloat32, DType::kFloat64, DType::kString, DType::kBFloat16};
    for (DType d : all)
        if (config_data_type(d) == type) return d;
    return std::nullopt;
}

std::string model_config_to_json(const ModelConfig& config) {
    pb::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    opts.always_print_primitive_fields = true;
    std::string text;
    auto st = pb::util::MessageToJsonString(config, &text, opts);
    KILN_CHECK(st.ok(), kInternal) << "bug in Kiln: model config to JSON: " << st.ToString();
    // proto3 JSON writes 64-bit integers as strings; Triton's config JSON has numbers.
    static const std::set<std::string> int64_fields = {
        "dims", "shape", "versions", "max_queue_delay_microseconds", "default_timeout_microseconds",
        "priority_levels", "default_priority_level"};
    std::function<void(nlohmann::json&)> fix = [&](nlohmann::json& v) {
        if (v.is_array()) {
            for (auto& e : v) fix(e);
            return;
        }
        if (!v.is_object()) return;
        for (auto& [key, e] : v.items()) {
            if (!int64_fields.count(key)) {
                fix(e);
                continue;
            }
            auto to_number = [](nlohmann::json& x) {
                if (x.is_string()) x = std::stoll(x.get<std::string>());
            };
            if (e.is_array()) {
                for (auto& x : e) to_number(x);
            } else {
                to_number(e);
            }
        }
    };
    nlohmann::json j = nlohmann::json::parse(text);
    fix(j);
    return j.dump();
}

}  // namespace kiln::serve
