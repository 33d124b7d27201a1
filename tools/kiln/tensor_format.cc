#include "tensor_format.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::cli {

std::string format_element(const Tensor& t, int64_t i) {
    DType dt = t.dtype();
    if (dt == DType::kString) return fmt::format("\"{}\"", t.data_as<std::string>()[i]);
    if (dtype_is_float(dt)) {
        double v = t.get_f64(i);
        if (std::isnan(v)) return "nan";
        if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
        return fmt::format("{:.6g}", v);
    }
    if (dt == DType::kBool) return t.get_i64(i) != 0 ? "true" : "false";
    if (dt == DType::kUInt64) return fmt::format("{}", static_cast<uint64_t>(t.get_i64(i)));
    return fmt::format("{}", t.get_i64(i));
}

std::string format_leading_values(const Tensor& t, int64_t limit) {
    std::string out;
    int64_t n = t.numel();
    for (int64_t i = 0; i < n && i < limit; ++i) {
        if (i > 0) out += ", ";
        out += format_element(t, i);
    }
    if (n > limit) out += ", ...";
    return out;
}

}  // namespace kiln::cli
