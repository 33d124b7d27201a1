// Status codes, the per-thread last error, version and dtype helpers of the C API.
#include "capi/status.h"

#include <optional>
#include <string>
#include <utility>

namespace kiln::capi {
namespace {
thread_local std::string last_error;

// keep-sorted by value: the C statuses mirror ErrorKind one to one.
constexpr std::pair<kiln_status, ErrorKind> kStatusKinds[] = {
    {KILN_INVALID_MODEL, ErrorKind::kInvalidModel},   {KILN_INVALID_ARGUMENT, ErrorKind::kInvalidArgument},
    {KILN_UNSUPPORTED, ErrorKind::kUnsupported},      {KILN_COMPILE_ERROR, ErrorKind::kCompileError},
    {KILN_OUT_OF_MEMORY, ErrorKind::kOutOfMemory},    {KILN_IO_ERROR, ErrorKind::kIOError},
    {KILN_PARSE_ERROR, ErrorKind::kParseError},       {KILN_CANCELLED, ErrorKind::kCancelled},
    {KILN_INTERNAL, ErrorKind::kInternal},
};
}  // namespace

kiln_status status_of(ErrorKind kind) {
    for (const auto& [status, k] : kStatusKinds)
        if (k == kind) return status;
    return KILN_INTERNAL;
}

kiln_status fail(kiln_status status, const char* message) noexcept {
    try {
        last_error = message;
    } catch (...) {
        // No memory for the message: the status still says what happened.
    }
    return status;
}

DType dtype_from_c(kiln_dtype dtype, const char* what) {
    std::optional<DType> d = dtype_from_onnx(static_cast<int>(dtype));
    KILN_CHECK(d.has_value(), kInvalidArgument) << what << ": unknown dtype " << static_cast<int>(dtype)
                                                << " (expected a kiln_dtype value: ONNX TensorProto.DataType)";
    return *d;
}

kiln_dtype dtype_to_c(DType dtype) { return static_cast<kiln_dtype>(dtype_to_onnx(dtype)); }

}  // namespace kiln::capi

extern "C" {

const char* kiln_version(void) { return KILN_VERSION; }

const char* kiln_status_name(kiln_status status) {
    if (status == KILN_OK) return "OK";
    for (const auto& [st, kind] : kiln::capi::kStatusKinds)
        if (st == status) return kiln::error_kind_name(kind);
    return "Unknown";
}

const char* kiln_last_error(void) { return kiln::capi::last_error.c_str(); }

size_t kiln_dtype_size(kiln_dtype dtype) {
    std::optional<kiln::DType> d = kiln::dtype_from_onnx(static_cast<int>(dtype));
    if (!d || *d == kiln::DType::kString) return 0;
    return kiln::dtype_size(*d);
}

}  // extern "C"
