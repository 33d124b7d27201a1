#include "output_compare.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::cli {
namespace {

bool float_close(double e, double g, const Tolerance& tol) {
    if (std::isnan(e) || std::isnan(g)) return std::isnan(e) && std::isnan(g);
    if (e == g) return true;  // also equal infinities, whose difference is NaN
    return std::fabs(g - e) <= tol.atol + tol.rtol * std::fabs(e);
}

bool element_equal(const Tensor& expected, const Tensor& got, int64_t i, const Tolerance& tol) {
    DType dt = expected.dtype();
    if (dt == DType::kString) return expected.data_as<std::string>()[i] == got.data_as<std::string>()[i];
    if (dtype_is_float(dt)) return float_close(expected.get_f64(i), got.get_f64(i), tol);
    if (dt == DType::kBool) return (expected.get_i64(i) != 0) == (got.get_i64(i) != 0);
    return expected.get_i64(i) == got.get_i64(i);
}

/// Shortest text that reads back as the same value of the element's type.
std::string exact_element(const Tensor& t, int64_t i) {
    DType dt = t.dtype();
    if (dt == DType::kString) return fmt::format("\"{}\"", t.data_as<std::string>()[i]);
    if (dt == DType::kFloat64) return fmt::format("{}", t.get_f64(i));
    if (dtype_is_float(dt)) return fmt::format("{}", static_cast<float>(t.get_f64(i)));
    if (dt == DType::kBool) return t.get_i64(i) != 0 ? "true" : "false";
    if (dt == DType::kUInt64) return fmt::format("{}", static_cast<uint64_t>(t.get_i64(i)));
    return fmt::format("{}", t.get_i64(i));
}

}  // namespace

std::optional<std::string> compare_output(const std::string& name, const Tensor& expected,
                                          const Tensor& got, const Tolerance& tol) {
    if (expected.dtype() != got.dtype()) {
        return fmt::format("output '{}' dtype mismatch: expected {}, got {}", name,
                           dtype_name(expected.dtype()), dtype_name(got.dtype()));
    }
    if (expected.shape() != got.shape()) {
        return fmt::format("output '{}' shape mismatch: expected {} got {}", name,
                           shape_str(expected.shape()), shape_str(got.shape()));
    }
    int64_t n = expected.numel();
    int64_t first_bad = -1, bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (element_equal(expected, got, i, tol)) continue;
        if (first_bad < 0) first_bad = i;
        ++bad;
    }
    if (bad == 0) return std::nullopt;
    return fmt::format("output '{}' element {}: expected {}, got {} ({} of {} elements differ)",
                       name, first_bad, exact_element(expected, first_bad),
                       exact_element(got, first_bad), bad, n);
}

std::optional<std::string> compare_value(const std::string& name, const Datum& expected, const Datum& got,
                                         const Tolerance& tol) {
    if (expected.kind() != got.kind())
        return fmt::format("output '{}': expected {}, got {}", name, expected.str(), got.str());
    if (expected.is_none()) return std::nullopt;
    if (expected.is_tensor()) return compare_output(name, expected.tensor(), got.tensor(), tol);
    const std::vector<Tensor>& e = expected.items();
    const std::vector<Tensor>& g = got.items();
    if (e.size() != g.size())
        return fmt::format("output '{}': expected a sequence of {} tensors, got {}", name, e.size(), g.size());
    for (size_t i = 0; i < e.size(); ++i)
        if (auto m = compare_output(fmt::format("{}[{}]", name, i), e[i], g[i], tol)) return m;
    return std::nullopt;
}

}  // namespace kiln::cli
