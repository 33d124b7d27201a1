// KServe v2 datatype names <-> Kiln dtypes, Triton priority levels -> Kiln classes, and the names
// of the outcome codes.
#include <utility>

#include "serve/types.h"

namespace kiln::serve {
namespace {

const std::pair<const char*, DType> kDatatypes[] = {
    {"BOOL", DType::kBool},    {"UINT8", DType::kUInt8},   {"UINT16", DType::kUInt16}, {"UINT32", DType::kUInt32},
    {"UINT64", DType::kUInt64}, {"INT8", DType::kInt8},     {"INT16", DType::kInt16},   {"INT32", DType::kInt32},
    {"INT64", DType::kInt64},  {"FP16", DType::kFloat16}, {"FP32", DType::kFloat32}, {"FP64", DType::kFloat64},
    {"BF16", DType::kBFloat16}, {"BYTES", DType::kString},
};

}  // namespace

std::optional<DType> dtype_from_kserve(const std::string& datatype) {
    for (const auto& [name, dtype] : kDatatypes)
        if (datatype == name) return dtype;
    return std::nullopt;
}

std::optional<std::string> kserve_datatype(DType dtype) {
    for (const auto& [name, d] : kDatatypes)
        if (d == dtype) return std::string(name);
    return std::nullopt;
}

std::optional<Priority> priority_from_level(uint64_t level) {
    if (level == 0) return std::nullopt;
    return level == 1 ? Priority::kRealTime : Priority::kBestEffort;
}

const char* code_name(Code code) {
    switch (code) {
        case Code::kOk: return "OK";
        case Code::kInvalidArgument: return "INVALID_ARGUMENT";
        case Code::kNotFound: return "NOT_FOUND";
        case Code::kUnavailable: return "UNAVAILABLE";
        case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
        case Code::kCancelled: return "CANCELLED";
        case Code::kInternal: return "INTERNAL";
    }
    return "UNKNOWN";
}

}  // namespace kiln::serve
