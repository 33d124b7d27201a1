// KServe v2 inference request parsing (see the header). Structure errors throw kiln::Error
// (kInvalidArgument) inside; parse_infer_request turns every exception into a Failure.
#include "serve/kserve_infer_request.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/error.h"
#include "serve/kserve_tensor_data.h"

namespace kiln::serve::kserve {
namespace {

using json = nlohmann::json;

std::string describe(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

/// obj[key] when present, else nullptr; `obj` must be an object.
const json* find(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

const json& require(const json& obj, const char* key, const std::string& what) {
    const json* v = find(obj, key);
    KILN_CHECK(v != nullptr, kInvalidArgument) << what << " has no \"" << key << "\"";
    return *v;
}

std::string require_string(const json& obj, const char* key, const std::string& what) {
    const json& v = require(obj, key, what);
    KILN_CHECK(v.is_string(), kInvalidArgument) << what << ": \"" << key << "\" must be a string, got " << describe(v);
    return v.get<std::string>();
}

/// A non-negative integer that fits int64.
int64_t as_count(const json& v, const std::string& what) {
    KILN_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
               kInvalidArgument)
        << what << " must be a non-negative integer, got " << describe(v);
    return v.get<int64_t>();
}

const json* parameters_of(const json& obj, const std::string& what) {
    const json* p = find(obj, "parameters");
    if (p == nullptr) return nullptr;
    KILN_CHECK(p->is_object(), kInvalidArgument) << what << ": \"parameters\" must be an object, got " << describe(*p);
    return p;
}

std::string datatype_list() {
    std::string s;
    for (const char* n : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16",
                          "FP32", "FP64", "BF16", "BYTES"})
        s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

void read_request_parameters(const json& params, ParsedInferRequest& out) {
    if (const json* v = find(params, "binary_data_output")) {
        KILN_CHECK(v->is_boolean(), kInvalidArgument)
            << "request parameter \"binary_data_output\" must be a boolean, got " << describe(*v);
        out.encoding.binary_default = v->get<bool>();
    }
    if (const json* v = find(params, "priority")) {
        if (v->is_string()) {
            const std::string s = v->get<std::string>();
            KILN_CHECK(s == "realtime" || s == "best_effort", kInvalidArgument)
                << "request parameter \"priority\" is \"" << s
                << "\"; expected \"realtime\", \"best_effort\" or an integer (0 = the model's default, 1 = "
                   "real-time, >1 = best effort)";
            out.request.priority = s == "realtime" ? Priority::kRealTime : Priority::kBestEffort;
        } else {
            const int64_t p = as_count(*v, "request parameter \"priority\"");
            out.request.priority = priority_from_level(static_cast<uint64_t>(p));
        }
    }
    if (const json* v = find(params, "timeout")) {
        const int64_t us = as_count(*v, "request parameter \"timeout\" (microseconds)");
        if (us > 0) out.request.timeout = std::chrono::microseconds(us);
    }
    if (const json* v = find(params, "sequence_id")) {
        const bool none =
            (v->is_number_integer() && v->get<int64_t>() == 0) || (v->is_string() && v->get<std::string>().empty());
        KILN_CHECK(none, kInvalidArgument) << "request parameter \"sequence_id\": sequence batching is not supported";
    }
}

Shape read_shape(const json& input, const std::string& what) {
    const json& s = require(input, "shape", what);
    KILN_CHECK(s.is_array(), kInvalidArgument) << what << ": \"shape\" must be an array, got " << describe(s);
    Shape shape;
    for (const json& d : s) {
        KILN_CHECK(d.is_number_integer(), kInvalidArgument)
            << what << ": \"shape\" must hold integers, got " << describe(d);
        KILN_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
                   kInvalidArgument)
            << what << ": shape dimension " << describe(d) << " is negative or too large";
        shape.push_back(d.get<int64_t>());
    }
    return shape;
}

/// One input; `binary` is the extension's data section and `offset` where this input's bytes
/// start in it (advanced past them).
NamedTensor read_input(const json& input, size_t index, std::string_view binary, size_t& offset) {
    KILN_CHECK(input.is_object(), kInvalidArgument)
        << "\"inputs\"[" << index << "] must be an object, got " << describe(input);
    const std::string name = require_string(input, "name", fmt::format("\"inputs\"[{}]", index));
    const std::string what = "input '" + name + "'";
    const std::string datatype = require_string(input, "datatype", what);
    const std::optional<DType> dtype = dtype_from_kserve(datatype);
    KILN_CHECK(dtype.has_value(), kInvalidArgument)
        << what << ": unknown datatype \"" << datatype << "\"; expected one of " << datatype_list();
    const Shape shape = read_shape(input, what);
    const json* params = parameters_of(input, what);
    const json* size = params ? find(*params, "binary_data_size") : nullptr;
    const json* data = find(input, "data");
    if (size != nullptr) {
        KILN_CHECK(data == nullptr, kInvalidArgument)
            << what << " has both \"data\" and the parameter \"binary_data_size\"; give one";
        const auto n = static_cast<uint64_t>(as_count(*size, what + ": parameter \"binary_data_size\""));
        KILN_CHECK(n <= binary.size() - offset, kInvalidArgument) << fmt::format(
            "truncated binary body: {} has binary_data_size {} at offset {} of the binary data, but only {} bytes "
            "remain",
            what, n, offset, binary.size() - offset);
        Tensor t = tensor_from_binary(what, *dtype, shape, binary.substr(offset, n));
        offset += n;
        return {name, std::move(t)};
    }
    KILN_CHECK(data != nullptr, kInvalidArgument)
        << what << " has neither \"data\" nor the parameter \"binary_data_size\"";
    return {name, tensor_from_json(what, *dtype, shape, *data)};
}

void read_outputs(const json& outputs, ParsedInferRequest& out) {
    KILN_CHECK(outputs.is_array(), kInvalidArgument) << "\"outputs\" must be an array, got " << describe(outputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
        const json& o = outputs[i];
        KILN_CHECK(o.is_object(), kInvalidArgument)
            << "\"outputs\"[" << i << "] must be an object, got " << describe(o);
        const std::string name = require_string(o, "name", fmt::format("\"outputs\"[{}]", i));
        const std::string what = "requested output '" + name + "'";
        for (const std::string& seen : out.request.outputs)
            KILN_CHECK(seen != name, kInvalidArgument) << what << " is requested twice";
        out.request.outputs.push_back(name);
        if (const json* params = parameters_of(o, what)) {
            if (const json* b = find(*params, "binary_data")) {
                KILN_CHECK(b->is_boolean(), kInvalidArgument)
                    << what << ": parameter \"binary_data\" must be a boolean, got " << describe(*b);
                out.encoding.binary[name] = b->get<bool>();
            }
            KILN_CHECK(find(*params, "classification") == nullptr, kInvalidArgument)
                << what << ": the classification extension is not supported";
            KILN_CHECK(find(*params, "shared_memory_region") == nullptr, kInvalidArgument)
                << what << ": the shared-memory extension is not supported";
        }
    }
}

void parse(std::string_view body, std::optional<size_t> header_length, ParsedInferRequest& out) {
    const size_t json_size = header_length.value_or(body.size());
    KILN_CHECK(json_size <= body.size(), kInvalidArgument)
        << "Inference-Header-Content-Length is " << json_size << " but the body has only " << body.size() << " bytes";
    // NOTE: nlohmann's parser takes a NUL byte for the end of its input; JSON text cannot hold
    // one, so a NUL means binary data sent without the header that says where the JSON ends.
    const std::string_view text = body.substr(0, json_size);
    if (size_t nul = text.find('\0'); nul != std::string_view::npos)
        KILN_THROW(kInvalidArgument)
            << "malformed JSON in the request: a NUL byte at offset " << nul
            << (header_length ? "" : " (binary tensor data needs the Inference-Header-Content-Length header)");
    json request;
    try {
        request = json::parse(text);
    } catch (const json::parse_error& e) {
        // e.what() is "[json.exception.parse_error.101] parse error at ...": keep what follows.
        std::string msg = e.what();
        if (size_t p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
        KILN_THROW(kInvalidArgument) << "malformed JSON in the request: " << msg;
    }
    KILN_CHECK(request.is_object(), kInvalidArgument) << "the request must be a JSON object, got " << describe(request);

    if (const json* id = find(request, "id")) {
        KILN_CHECK(id->is_string(), kInvalidArgument) << "request \"id\" must be a string, got " << describe(*id);
        out.request.id = id->get<std::string>();
    }
    if (const json* params = parameters_of(request, "the request")) read_request_parameters(*params, out);

    const json& inputs = require(request, "inputs", "the request");
    KILN_CHECK(inputs.is_array(), kInvalidArgument) << "\"inputs\" must be an array, got " << describe(inputs);
    const std::string_view binary = body.substr(json_size);
    size_t offset = 0;
    std::set<std::string> names;
    for (size_t i = 0; i < inputs.size(); ++i) {
        NamedTensor t = read_input(inputs[i], i, binary, offset);
        KILN_CHECK(names.insert(t.name).second, kInvalidArgument) << "input '" << t.name << "' is given twice";
        out.request.inputs.push_back(std::move(t));
    }
    KILN_CHECK(offset == binary.size(), kInvalidArgument)
        << "the body has " << binary.size() - offset
        << " bytes after the inputs' binary data (the binary_data_size parameters add up to " << offset << ")";
    if (const json* outputs = find(request, "outputs")) read_outputs(*outputs, out);
}

}  // namespace

Failure parse_header_length(std::string_view value, size_t& out) {
    const char* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, out);
    if (ec != std::errc() || ptr != end || value.empty())
        return {Code::kInvalidArgument,
                "Inference-Header-Content-Length must be a byte count, got \"" + std::string(value) + "\""};
    return Failure::none();
}

Failure parse_infer_request(std::string_view body, std::optional<size_t> header_length, ParsedInferRequest& out) {
    try {
        parse(body, header_length, out);
        return Failure::none();
    } catch (const kiln::Error& e) {
        return {e.kind() == ErrorKind::kInternal ? Code::kInternal : Code::kInvalidArgument, e.message()};
    } catch (const nlohmann::json::exception& e) {
        return {Code::kInvalidArgument, std::string("invalid request: ") + e.what()};
    } catch (const std::bad_alloc&) {
        return {Code::kUnavailable, "out of memory while reading the request"};
    }
}

}  // namespace kiln::serve::kserve
