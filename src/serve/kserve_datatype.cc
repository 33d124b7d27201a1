// KServe v2 datatype names <-> Kiln dtypes (declared in server.h). The protocol's names are
// Triton's: BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, FP64, BF16 and BYTES (strings).
#include <array>
#include <utility>

#include "serve/server.h"

namespace kiln::serve {
namespace {

// keep-sorted by the protocol's order (Triton's model_config.proto DataType)
constexpr std::array<std::pair<const char*, DType>, 14> kDatatypes{{
    {"BOOL", DType::kBool},
    {"UINT8", DType::kUInt8},
    {"UINT16", DType::kUInt16},
    {"UINT32", DType::kUInt32},
    {"UINT64", DType::kUInt64},
    {"INT8", DType::kInt8},
    {"INT16", DType::kInt16},
    {"INT32", DType::kInt32},
    {"INT64", DType::kInt64},
    {"FP16", DType::kFloat16},
    {"FP32", DType::kFloat32},
    {"FP64", DType::kFloat64},
    {"BYTES", DType::kString},
    {"BF16", DType::kBFloat16},
}};

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

}  // namespace kiln::serve
