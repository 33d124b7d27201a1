#include "serve/grpc_infer_convert.h"

#include <bit>
#include <cstring>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace kiln::serve {
namespace {

// The wire carries little-endian elements; the raw copies below are plain memcpy.
static_assert(std::endian::native == std::endian::little, "the KServe raw tensor format is little-endian");

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;

// More elements than any real tensor has: guards the element count against overflow before a
// byte size is computed from it.
constexpr int64_t kMaxElements = int64_t{1} << 48;

Failure invalid(std::string message) { return {Code::kInvalidArgument, std::move(message)}; }

// The typed InferTensorContents field each dtype's values travel in (kNone: raw only).
enum class Field { kBool, kInt, kInt64, kUint, kUint64, kFp32, kFp64, kBytes, kNone };
constexpr const char* kFieldNames[] = {"bool_contents",   "int_contents",  "int64_contents",
                                       "uint_contents",   "uint64_contents", "fp32_contents",
                                       "fp64_contents",   "bytes_contents"};
constexpr int kNumFields = 8;

Field typed_field(DType t) {
    switch (t) {
        case DType::kBool: return Field::kBool;
        case DType::kInt8:
        case DType::kInt16:
        case DType::kInt32: return Field::kInt;
        case DType::kInt64: return Field::kInt64;
        case DType::kUInt8:
        case DType::kUInt16:
        case DType::kUInt32: return Field::kUint;
        case DType::kUInt64: return Field::kUint64;
        case DType::kFloat32: return Field::kFp32;
        case DType::kFloat64: return Field::kFp64;
        case DType::kString: return Field::kBytes;
        default: return Field::kNone;
    }
}

int field_size(const InferTensorContents& c, Field f) {
    switch (f) {
        case Field::kBool: return c.bool_contents_size();
        case Field::kInt: return c.int_contents_size();
        case Field::kInt64: return c.int64_contents_size();
        case Field::kUint: return c.uint_contents_size();
        case Field::kUint64: return c.uint64_contents_size();
        case Field::kFp32: return c.fp32_contents_size();
        case Field::kFp64: return c.fp64_contents_size();
        case Field::kBytes: return c.bytes_contents_size();
        case Field::kNone: return 0;
    }
    return 0;
}

// Copies typed values into the tensor's storage, checking that each fits the narrower dtype
// (INT8 values travel in int32 int_contents). Returns the index of the first value out of
// range, or -1.
template <typename Dst, typename Src>
int copy_values(const google::protobuf::RepeatedField<Src>& src, Tensor& t) {
    Dst* dst = t.data_as<Dst>();
    for (int i = 0; i < src.size(); ++i) {
        Src v = src.Get(i);
        if constexpr (std::is_integral_v<Src> && !std::is_same_v<Src, bool> &&
                      std::is_integral_v<Dst>) {
            if (!std::in_range<Dst>(v)) return i;
        }
        dst[i] = static_cast<Dst>(v);
    }
    return -1;
}

// One input being read: for messages.
struct InputSite {
    const std::string& model;
    const std::string& name;
    const std::string& datatype;
    const Shape& shape;
    std::string str() const {
        return fmt::format("model '{}': input '{}' ({} {})", model, name, datatype, shape_str(shape));
    }
};

Failure read_typed(const InferTensorContents& c, DType dtype, int64_t numel, const InputSite& at,
                   Tensor& out) {
    Field want = typed_field(dtype);
    for (int f = 0; f < kNumFields; ++f) {
        if (static_cast<Field>(f) != want && field_size(c, static_cast<Field>(f)) > 0) {
            if (want == Field::kNone) {
                return invalid(fmt::format("{}: {} has no typed contents field; send it in "
                                           "raw_input_contents (got {} values in {})",
                                           at.str(), at.datatype, field_size(c, static_cast<Field>(f)),
                                           kFieldNames[f]));
            }
            return invalid(fmt::format("{}: {} values belong in {}, got {} values in {}", at.str(),
                                       at.datatype, kFieldNames[static_cast<int>(want)],
                                       field_size(c, static_cast<Field>(f)), kFieldNames[f]));
        }
    }
    int got = field_size(c, want);
    if (got != numel) {
        if (want == Field::kNone) {
            return invalid(fmt::format("{}: no data ({} has no typed contents field; send it in "
                                       "raw_input_contents)", at.str(), at.datatype));
        }
        return invalid(fmt::format("{}: expected {} values in {}, got {}", at.str(), numel,
                                   kFieldNames[static_cast<int>(want)], got));
    }
    out = Tensor(dtype, at.shape);
    int bad = -1;
    switch (dtype) {
        case DType::kBool: bad = copy_values<uint8_t>(c.bool_contents(), out); break;
        case DType::kInt8: bad = copy_values<int8_t>(c.int_contents(), out); break;
        case DType::kInt16: bad = copy_values<int16_t>(c.int_contents(), out); break;
        case DType::kInt32: bad = copy_values<int32_t>(c.int_contents(), out); break;
        case DType::kInt64: bad = copy_values<int64_t>(c.int64_contents(), out); break;
        case DType::kUInt8: bad = copy_values<uint8_t>(c.uint_contents(), out); break;
        case DType::kUInt16: bad = copy_values<uint16_t>(c.uint_contents(), out); break;
        case DType::kUInt32: bad = copy_values<uint32_t>(c.uint_contents(), out); break;
        case DType::kUInt64: bad = copy_values<uint64_t>(c.uint64_contents(), out); break;
        case DType::kFloat32: bad = copy_values<float>(c.fp32_contents(), out); break;
        case DType::kFloat64: bad = copy_values<double>(c.fp64_contents(), out); break;
        case DType::kString: {
            auto* dst = out.data_as<std::string>();
            for (int i = 0; i < got; ++i) dst[i] = c.bytes_contents(i);
            break;
        }
        default: break;  // kNone with numel == 0: nothing to copy
    }
    if (bad >= 0) {
        int64_t v = want == Field::kInt ? c.int_contents(bad) : int64_t{c.uint_contents(bad)};
        return invalid(fmt::format("{}: value {} at index {} of {} is out of range for {}", at.str(),
                                   v, bad, kFieldNames[static_cast<int>(want)], at.datatype));
    }
    return Failure::none();
}

uint32_t read_le32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// BYTES in raw form: each element a 4-byte little-endian length and that many bytes.
Failure read_raw_strings(const std::string& raw, int64_t numel, const InputSite& at, Tensor& out) {
    std::vector<std::string_view> elems;
    size_t pos = 0;
    while (pos < raw.size()) {
        if (raw.size() - pos < 4) {
            return invalid(fmt::format("{}: raw contents end inside the 4-byte length of element {} "
                                       "({} of {} bytes left)", at.str(), elems.size(),
                                       raw.size() - pos, raw.size()));
        }
        uint32_t len = read_le32(raw.data() + pos);
        pos += 4;
        if (len > raw.size() - pos) {
            return invalid(fmt::format("{}: element {} claims {} bytes but only {} remain in the "
                                       "raw contents", at.str(), elems.size(), len, raw.size() - pos));
        }
        elems.emplace_back(raw.data() + pos, len);
        pos += len;
    }
    if (static_cast<int64_t>(elems.size()) != numel) {
        return invalid(fmt::format("{}: expected {} length-prefixed elements in raw_input_contents, "
                                   "got {}", at.str(), numel, elems.size()));
    }
    out = Tensor(DType::kString, at.shape);
    auto* dst = out.data_as<std::string>();
    for (size_t i = 0; i < elems.size(); ++i) dst[i] = std::string(elems[i]);
    return Failure::none();
}

Failure read_raw(const std::string& raw, DType dtype, int64_t numel, const InputSite& at,
                 Tensor& out) {
    if (dtype == DType::kString) return read_raw_strings(raw, numel, at, out);
    size_t want = static_cast<size_t>(numel) * dtype_size(dtype);
    if (raw.size() != want) {
        return invalid(fmt::format("{}: expected {} bytes in raw_input_contents ({} elements of {} "
                                   "bytes), got {}", at.str(), want, numel, dtype_size(dtype),
                                   raw.size()));
    }
    out = Tensor(dtype, at.shape);
    if (want > 0) std::memcpy(out.data(), raw.data(), want);
    return Failure::none();
}

Failure read_input(const ModelInferRequest& req, int index, NamedTensor& out) {
    const auto& in = req.inputs(index);
    Shape shape(in.shape().begin(), in.shape().end());
    InputSite at{req.model_name(), in.name(), in.datatype(), shape};
    if (in.name().empty()) {
        return invalid(fmt::format("model '{}': input {} has no name", req.model_name(), index));
    }
    std::optional<DType> dtype = dtype_from_kserve(in.datatype());
    if (!dtype) {
        return invalid(fmt::format("{}: unknown datatype '{}' (expected one of BOOL, UINT8, "
                                   "UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, "
                                   "BF16, FP32, FP64, BYTES)", at.str(), in.datatype()));
    }
    int64_t numel = 1;
    for (int64_t d : shape) {
        if (d < 0) return invalid(fmt::format("{}: negative dimension {} in the shape", at.str(), d));
        if (d > 0 && numel > kMaxElements / d) {
            return invalid(fmt::format("{}: the shape has more than 2^48 elements", at.str()));
        }
        numel *= d;
    }
    out.name = in.name();
    if (req.raw_input_contents_size() > 0) {
        if (in.has_contents() && in.contents().ByteSizeLong() > 0) {
            return invalid(fmt::format("{}: has typed contents while the request carries "
                                       "raw_input_contents; use one or the other", at.str()));
        }
        return read_raw(req.raw_input_contents(index), *dtype, numel, at, out.tensor);
    }
    return read_typed(in.contents(), *dtype, numel, at, out.tensor);
}

// An integer parameter (int64_param or uint64_param) that must not be negative.
Failure read_count_param(const std::string& model, const std::string& name,
                         const InferParameter& p, uint64_t& out) {
    switch (p.parameter_choice_case()) {
        case InferParameter::kUint64Param: out = p.uint64_param(); return Failure::none();
        case InferParameter::kInt64Param:
            if (p.int64_param() < 0) {
                return invalid(fmt::format("model '{}': parameter '{}' must not be negative, got {}",
                                           model, name, p.int64_param()));
            }
            out = static_cast<uint64_t>(p.int64_param());
            return Failure::none();
        default:
            return invalid(fmt::format("model '{}': parameter '{}' must be an integer "
                                       "(uint64_param or int64_param)", model, name));
    }
}

bool param_is_set(const InferParameter& p) {
    switch (p.parameter_choice_case()) {
        case InferParameter::kBoolParam: return p.bool_param();
        case InferParameter::kInt64Param: return p.int64_param() != 0;
        case InferParameter::kUint64Param: return p.uint64_param() != 0;
        case InferParameter::kStringParam: return !p.string_param().empty();
        case InferParameter::kDoubleParam: return p.double_param() != 0;
        default: return false;
    }
}

Failure read_parameters(const ModelInferRequest& in, InferRequest& out) {
    for (const auto& [name, p] : in.parameters()) {
        if (name == "priority") {
            uint64_t v = 0;
            if (Failure f = read_count_param(in.model_name(), name, p, v); !f.ok()) return f;
            out.priority = priority_from_level(v);
        } else if (name == "timeout") {
            uint64_t v = 0;
            if (Failure f = read_count_param(in.model_name(), name, p, v); !f.ok()) return f;
            if (v > 0) out.timeout = std::chrono::microseconds(static_cast<int64_t>(v));
        } else if (name == "sequence_id" || name == "sequence_start" || name == "sequence_end") {
            if (param_is_set(p)) {
                return invalid(fmt::format("model '{}': parameter '{}': Kiln has no sequence "
                                           "batching", in.model_name(), name));
            }
        }
    }
    return Failure::none();
}

}  // namespace

Failure infer_request_from_grpc(const ModelInferRequest& in, InferRequest& out) {
    out.model = in.model_name();
    out.version = in.model_version();
    out.id = in.id();
    if (in.model_name().empty()) return invalid("the request has no model_name");
    if (Failure f = read_parameters(in, out); !f.ok()) return f;

    std::set<std::string> seen;
    for (const auto& o : in.outputs()) {
        if (o.parameters().contains("classification")) {
            return invalid(fmt::format("model '{}': output '{}': classification outputs are not "
                                       "supported", in.model_name(), o.name()));
        }
        if (!seen.insert(o.name()).second) {
            return invalid(fmt::format("model '{}': output '{}' is requested twice",
                                       in.model_name(), o.name()));
        }
        out.outputs.push_back(o.name());
    }

    if (in.raw_input_contents_size() > 0 && in.raw_input_contents_size() != in.inputs_size()) {
        return invalid(fmt::format("model '{}': raw_input_contents has {} entries for {} inputs "
                                   "(expected one per input, in input order)", in.model_name(),
                                   in.raw_input_contents_size(), in.inputs_size()));
    }
    seen.clear();
    out.inputs.resize(in.inputs_size());
    for (int i = 0; i < in.inputs_size(); ++i) {
        if (!seen.insert(in.inputs(i).name()).second) {
            return invalid(fmt::format("model '{}': input '{}' is given twice", in.model_name(),
                                       in.inputs(i).name()));
        }
        if (Failure f = read_input(in, i, out.inputs[i]); !f.ok()) return f;
    }
    return Failure::none();
}

Failure infer_response_to_grpc(const InferResponse& in, inference::ModelInferResponse& out) {
    out.set_model_name(in.model);
    out.set_model_version(in.version);
    out.set_id(in.id);
    for (const NamedTensor& t : in.outputs) {
        std::optional<std::string> datatype = kserve_datatype(t.tensor.dtype());
        if (!datatype) {
            return {Code::kInternal,
                    fmt::format("model '{}': output '{}' has dtype {}, which KServe v2 cannot carry",
                                in.model, t.name, dtype_name(t.tensor.dtype()))};
        }
        auto* o = out.add_outputs();
        o->set_name(t.name);
        o->set_datatype(*datatype);
        for (int64_t d : t.tensor.shape()) o->add_shape(d);
        std::string* raw = out.add_raw_output_contents();
        if (t.tensor.dtype() == DType::kString) {
            const auto* s = t.tensor.data_as<std::string>();
            size_t total = 0;
            for (int64_t i = 0; i < t.tensor.numel(); ++i) total += 4 + s[i].size();
            raw->reserve(total);
            for (int64_t i = 0; i < t.tensor.numel(); ++i) {
                auto len = static_cast<uint32_t>(s[i].size());
                raw->append(reinterpret_cast<const char*>(&len), 4);
                raw->append(s[i]);
            }
        } else if (t.tensor.nbytes() > 0) {
            raw->assign(static_cast<const char*>(t.tensor.data()), t.tensor.nbytes());
        }
    }
    return Failure::none();
}

}  // namespace kiln::serve
