// Request checks (request_validation.h).
#include "serve/request_validation.h"

#include <map>
#include <set>

namespace kiln::serve {
namespace {

Failure invalid(const std::string& message) { return {Code::kInvalidArgument, message}; }

std::string dims_text(const google::protobuf::RepeatedField<int64_t>& dims, bool batch) {
    std::string s = batch ? "[-1" : "[";
    for (int i = 0; i < dims.size(); ++i) s += (i || batch ? "," : "") + std::to_string(dims[i]);
    return s + "]";
}

std::string datatype_text(DType d) { return kserve_datatype(d).value_or(dtype_name(d)); }

}  // namespace

Failure validate_request(InferRequest& request, const inference::ModelConfig& config,
                         const std::vector<TensorInfo>& model_inputs, PendingRequest& out) {
    const std::string where = "model '" + config.name() + "'";
    const bool batching = config.max_batch_size() > 0;
    std::map<std::string, NamedTensor*> given;
    for (NamedTensor& t : request.inputs) {
        if (!given.emplace(t.name, &t).second) return invalid(where + ": input '" + t.name + "' is given twice");
        bool known = false;
        for (const auto& c : config.input()) known = known || c.name() == t.name;
        if (!known) {
            std::string names;
            for (const auto& c : config.input()) names += (names.empty() ? "" : ", ") + c.name();
            return invalid(where + ": unknown input '" + t.name + "' (the model's inputs: " + names + ")");
        }
    }
    out.inputs.clear();
    out.rows = 1;
    out.batch_key.clear();
    std::string rows_from;
    std::map<std::string, std::pair<int64_t, std::string>> symbols;  // symbol -> value, input
    for (const TensorInfo& info : model_inputs) {
        const inference::ModelInput* c = nullptr;
        for (const auto& in : config.input())
            if (in.name() == info.name) c = &in;
        if (!c) return {Code::kInternal, "bug in Kiln: model input '" + info.name + "' has no config entry"};
        auto it = given.find(info.name);
        if (it == given.end()) return invalid(where + ": input '" + info.name + "' is missing");
        Tensor& t = it->second->tensor;
        std::optional<DType> want = dtype_from_config(c->data_type());
        if (!want || t.dtype() != *want)
            return invalid(where + " input '" + info.name + "': expected datatype " +
                           (want ? datatype_text(*want) : inference::DataType_Name(c->data_type())) + ", got " +
                           datatype_text(t.dtype()));
        const Shape& shape = t.shape();
        size_t rank = static_cast<size_t>(c->dims_size()) + (batching ? 1 : 0);
        bool ok = shape.size() == rank;
        for (int d = 0; ok && d < c->dims_size(); ++d) {
            int64_t got = shape[d + (batching ? 1 : 0)];
            ok = c->dims(d) == -1 || c->dims(d) == got;
        }
        if (!ok)
            return invalid(where + " input '" + info.name + "': expected shape " + dims_text(c->dims(), batching) +
                           ", got " + shape_str(shape));
        Shape model_shape = shape;
        if (batching) {
            int64_t rows = shape[0];
            if (rows < 1 || rows > config.max_batch_size())
                return invalid(where + " input '" + info.name + "': batch size " + std::to_string(rows) +
                               " is outside 1.." + std::to_string(config.max_batch_size()) + " (max_batch_size)");
            if (rows_from.empty()) {
                out.rows = rows;
                rows_from = info.name;
            } else if (rows != out.rows) {
                return invalid(where + " input '" + info.name + "': batch size " + std::to_string(rows) + ", input '" +
                               rows_from + "' has " + std::to_string(out.rows));
            }
            out.batch_key += shape_str(Shape(shape.begin() + 1, shape.end()));
        }
        if (c->has_reshape()) {
            model_shape.assign(batching ? 1 : 0, out.rows);
            model_shape.insert(model_shape.end(), c->reshape().shape().begin(), c->reshape().shape().end());
        }
        // The model's symbolic dims must agree across inputs (the batch dim aside: it is checked
        // above and is the batch's in the end).
        for (size_t d = batching ? 1 : 0; d < info.symbols.size() && d < model_shape.size(); ++d) {
            if (info.symbols[d].empty()) continue;
            auto [s, fresh] = symbols.emplace(info.symbols[d], std::make_pair(model_shape[d], info.name));
            if (!fresh && s->second.first != model_shape[d])
                return invalid(where + " input '" + info.name + "': dimension '" + info.symbols[d] + "' is " +
                               std::to_string(model_shape[d]) + ", but " + std::to_string(s->second.first) +
                               " in input '" + s->second.second + "'");
        }
        out.inputs.push_back(model_shape == shape ? std::move(t) : t.reshaped(model_shape));
    }
    for (const std::string& name : request.outputs) {
        bool known = false;
        for (const auto& o : config.output()) known = known || o.name() == name;
        if (!known) {
            std::string names;
            for (const auto& o : config.output()) names += (names.empty() ? "" : ", ") + o.name();
            return invalid(where + ": unknown output '" + name + "' (the model's outputs: " + names + ")");
        }
    }
    return Failure::none();
}

}  // namespace kiln::serve
