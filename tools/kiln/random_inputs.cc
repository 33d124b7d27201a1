// Random input generation. splitmix64 is used instead of <random> distributions, whose output is
// implementation-defined, so a seed means the same data with any standard library.
#include "random_inputs.h"

#include <cmath>

#include "support/error.h"

namespace kiln::cli {

Shape resolve_input_shape(const TensorInfo& info, const std::map<std::string, int64_t>& dims) {
    Shape shape = info.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] >= 0) continue;
        std::string sym = d < info.symbols.size() ? info.symbols[d] : "";
        if (sym.empty()) {
            KILN_THROW(kInvalidArgument)
                << "input '" << info.name << "' has unknown dimension " << d
                << ": pass the input with --input " << info.name << "=FILE.npy";
        }
        auto it = dims.find(sym);
        KILN_CHECK(it != dims.end(), kInvalidArgument)
            << "input '" << info.name << "' has symbolic dimension '" << sym << "': pass --dim "
            << sym << "=VALUE";
        shape[d] = it->second;
    }
    return shape;
}

uint64_t RandomInputs::next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Mantissa bits of a float type: drawing u = k / 2^bits makes 2u - 1 exact in that type, so
// rounding can never produce 1.0 and the range stays [-1, 1).
static int float_mantissa_bits(DType dtype) {
    switch (dtype) {
        case DType::kFloat64: return 53;
        case DType::kFloat16: return 11;
        case DType::kBFloat16: return 8;
        default: return 24;
    }
}

Tensor RandomInputs::make(DType dtype, const Shape& shape) {
    Tensor t(dtype, shape);
    int64_t n = t.numel();
    if (dtype_is_float(dtype)) {
        int bits = float_mantissa_bits(dtype);
        double scale = std::ldexp(1.0, -bits);
        for (int64_t i = 0; i < n; ++i) {
            double u = static_cast<double>(next() >> (64 - bits)) * scale;  // [0, 1)
            t.set_f64(i, 2.0 * u - 1.0);
        }
    } else if (dtype == DType::kBool) {
        for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(next() >> 63));
    } else {
        // NOTE: [0, 10) fits every integer dtype (the narrowest are i8/u8), so no clamp is needed.
        for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(next() % 10));
    }
    return t;
}

}  // namespace kiln::cli
