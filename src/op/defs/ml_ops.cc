// ai.onnx.ml ArrayFeatureExtractor (1) and Binarizer (1): host kernels (op/host.h).
//
// ArrayFeatureExtractor: Z[..., k] = X[..., Y.flat[k]] — the flattened indices Y select
// elements of X's last axis. A 1-D X gives a [1, K] Z (what ONNX Runtime and the ONNX reference
// do). Indices must lie in [0, X.shape[-1]) (ONNX Runtime rejects the others too).
// Binarizer: Y = X > threshold ? 1 : 0 in X's dtype (NaN gives 0, like the ONNX reference).
// Scaler: Y = (X - offset) * scale in f32; offset / scale hold 1 or C (X's last dim) values
//   (absent: 0 / 1).
// Normalizer: each row of X [N, C] (a 1-D X is one row) divided, in f32, by its MAX (the largest
//   value, not the largest magnitude: ONNX Runtime's), L1 (sum of |x|) or L2 (sqrt of the sum of
//   squares) norm; a row whose norm is 0 is left as it is.
// Imputer: elements equal to the replaced value (replaced_value_float, NaN matching NaN, for float
//   X; replaced_value_int64 for integer X) become the imputed value of their column
//   (imputed_value_floats / imputed_value_int64s: 1 or C values); Y has X's dtype.
// CategoryMapper: string X -> i64 Y through cats_strings -> cats_int64s (default_int64, -1), i64
//   X -> string Y the other way (default_string, "_Unused"); a category listed twice maps to its
//   last partner.
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const std::vector<DType>& afe_types() {
    static const std::vector<DType> t{DType::kFloat32, DType::kFloat64, DType::kInt64,
                                      DType::kInt32, DType::kString};
    return t;
}

const std::vector<DType>& binarizer_types() {
    static const std::vector<DType> t{DType::kFloat32, DType::kFloat64, DType::kInt64,
                                      DType::kInt32};
    return t;
}

std::vector<Datum> afe_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    check_dtype(n, "X", x.dtype(), afe_types());
    KILN_CHECK(y.dtype() == DType::kInt64, kInvalidArgument)
        << n.describe() << ": Y must be i64 indices, got " << dtype_name(y.dtype());
    KILN_CHECK(!x.shape().empty(), kInvalidArgument)
        << n.describe() << ": X must have rank >= 1, got a scalar";
    const int64_t last = x.shape().back();
    const int64_t k = y.numel();
    KILN_CHECK(k > 0, kInvalidArgument) << n.describe() << ": Y must hold at least one index";
    std::vector<int64_t> idx(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
        idx[static_cast<size_t>(i)] = y.data_as<int64_t>()[i];
        KILN_CHECK(idx[static_cast<size_t>(i)] >= 0 && idx[static_cast<size_t>(i)] < last,
                   kInvalidArgument)
            << n.describe() << ": index Y[" << i << "]=" << idx[static_cast<size_t>(i)]
            << " is out of range [0, " << last << ")";
    }
    Shape z_shape = x.shape();
    if (z_shape.size() == 1) z_shape.insert(z_shape.begin(), 1);
    z_shape.back() = k;
    Tensor z(x.dtype(), z_shape);
    const int64_t rows = last == 0 ? 0 : x.numel() / last;
    const size_t sz = dtype_size(x.dtype());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j) {
            const int64_t src = r * last + idx[static_cast<size_t>(j)], dst = r * k + j;
            if (x.dtype() == DType::kString)
                z.data_as<std::string>()[dst] = x.data_as<std::string>()[src];
            else
                std::memcpy(static_cast<char*>(z.data()) + dst * sz,
                            static_cast<const char*>(x.data()) + src * sz, sz);
        }
    return {std::move(z)};
}

OpDef array_feature_extractor_op() {
    OpDef d;
    d.name = "ArrayFeatureExtractor";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.min_inputs = d.max_inputs = 2;
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& y = input_type(n, 1, "Y");
        check_dtype(n, "X", x.dtype, afe_types());
        check_dtype(n, "Y", y.dtype, {DType::kInt64});
        KILN_CHECK(x.rank() >= 1, kInvalidModel)
            << node_label(n) << ": X must have rank >= 1, got a scalar";
        std::vector<ir::Dim> z = x.shape;
        if (z.size() == 1) z.insert(z.begin(), ir::Dim(1));
        z.back() = y.is_static() ? ir::Dim(shape_numel(y.static_shape())) : ir::Dim::sym("?");
        return std::vector<ir::TensorType>{{x.dtype, z}};
    };
    d.host = afe_host;
    return d;
}

template <typename T>
void binarize(const Tensor& x, Tensor& y, double threshold) {
    const T* in = x.data_as<T>();
    T* out = y.data_as<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
        out[i] = static_cast<double>(in[i]) > threshold ? T(1) : T(0);
}

OpDef binarizer_op() {
    OpDef d;
    d.name = "Binarizer";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {{"threshold", AttrKind::kFloat, ir::Attr(0.0)}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, binarizer_types());
        return std::vector<ir::TensorType>{x};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = a.tensor(0);
        check_dtype(a.node, "X", x.dtype(), binarizer_types());
        const double threshold = a.node.attr_float("threshold", 0.0);
        Tensor y(x.dtype(), x.shape());
        switch (x.dtype()) {
            case DType::kFloat32:
                binarize<float>(x, y, threshold);
                break;
            case DType::kFloat64:
                binarize<double>(x, y, threshold);
                break;
            case DType::kInt64:
                binarize<int64_t>(x, y, threshold);
                break;
            default:
                binarize<int32_t>(x, y, threshold);
                break;
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

// ---------------------------------------------------------------------------------------------
// Scaler, Normalizer, Imputer, CategoryMapper

const std::vector<DType>& numeric_in_types() { return binarizer_types(); }

// A per-column parameter list: 1 value (broadcast) or `cols` values; an error otherwise.
double column_value(const std::vector<double>& v, int64_t col) {
    return v.size() == 1 ? v[0] : v[static_cast<size_t>(col)];
}
void check_columns(const ir::Node& n, const char* what, size_t got, int64_t cols) {
    KILN_CHECK(got == 1 || static_cast<int64_t>(got) == cols, kInvalidArgument)
        << n.describe() << ": " << what << " has " << got << " entries, expected 1 or " << cols
        << " (X's last dimension)";
}

// Scaler and Normalizer: numeric X in, f32 of X's shape out.
std::vector<ir::TensorType> float_like_input(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    check_dtype(n, "X", x.dtype, numeric_in_types());
    return {{DType::kFloat32, x.shape}};
}

OpDef scaler_op() {
    OpDef d;
    d.name = "Scaler";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {{"offset", AttrKind::kFloats, std::nullopt},
               {"scale", AttrKind::kFloats, std::nullopt}};
    d.pattern = OpPattern::kOpaque;
    d.infer = float_like_input;
    d.host = [](const HostArgs& a) {
        const ir::Node& n = a.node;
        const Tensor& x = a.tensor(0);
        check_dtype(n, "X", x.dtype(), numeric_in_types());
        const int64_t cols = x.shape().empty() ? 1 : x.shape().back();
        const auto offset = n.attr_floats("offset", {0.0});
        const auto scale = n.attr_floats("scale", {1.0});
        check_columns(n, "offset", offset.size(), cols);
        check_columns(n, "scale", scale.size(), cols);
        Tensor y(DType::kFloat32, x.shape());
        for (int64_t i = 0; i < x.numel(); ++i) {
            const int64_t c = i % cols;
            y.data_as<float>()[i] = static_cast<float>((x.get_f64(i) - column_value(offset, c)) *
                                                       column_value(scale, c));
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

OpDef normalizer_op() {
    OpDef d;
    d.name = "Normalizer";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {{"norm", AttrKind::kString, ir::Attr(std::string("MAX"))}};
    d.pattern = OpPattern::kOpaque;
    d.infer = float_like_input;
    d.host = [](const HostArgs& a) {
        const ir::Node& n = a.node;
        const Tensor& x = a.tensor(0);
        check_dtype(n, "X", x.dtype(), numeric_in_types());
        KILN_CHECK(x.shape().size() == 1 || x.shape().size() == 2, kInvalidArgument)
            << n.describe() << ": X must have shape [N, C] (or [C]), got " << shape_str(x.shape());
        const std::string norm = n.attr_string("norm", "MAX");
        KILN_CHECK(norm == "MAX" || norm == "L1" || norm == "L2", kInvalidArgument)
            << n.describe() << ": norm must be MAX, L1 or L2, got '" << norm << "'";
        const int64_t cols = x.shape().back();
        const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
        Tensor y(DType::kFloat32, x.shape());
        for (int64_t r = 0; r < rows; ++r) {
            double den = norm == "MAX" ? -INFINITY : 0.0;
            for (int64_t c = 0; c < cols; ++c) {
                const double v = x.get_f64(r * cols + c);
                if (norm == "MAX") den = std::max(den, v);
                else if (norm == "L1") den += std::abs(v);
                else den += v * v;
            }
            if (norm == "L2") den = std::sqrt(den);
            for (int64_t c = 0; c < cols; ++c) {
                const double v = x.get_f64(r * cols + c);
                y.data_as<float>()[r * cols + c] = static_cast<float>(den == 0 ? v : v / den);
            }
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

OpDef imputer_op() {
    OpDef d;
    d.name = "Imputer";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {{"imputed_value_floats", AttrKind::kFloats, std::nullopt},
               {"imputed_value_int64s", AttrKind::kInts, std::nullopt},
               {"replaced_value_float", AttrKind::kFloat, ir::Attr(0.0)},
               {"replaced_value_int64", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, numeric_in_types());
        return std::vector<ir::TensorType>{x};
    };
    d.host = [](const HostArgs& a) {
        const ir::Node& n = a.node;
        const Tensor& x = a.tensor(0);
        check_dtype(n, "X", x.dtype(), numeric_in_types());
        const int64_t cols = x.shape().empty() ? 1 : x.shape().back();
        Tensor y = x.clone();
        if (dtype_is_float(x.dtype())) {
            const auto imputed = n.attr_floats("imputed_value_floats");
            check_columns(n, "imputed_value_floats", imputed.size(), cols);
            const double replaced = n.attr_float("replaced_value_float", 0.0);
            for (int64_t i = 0; i < x.numel(); ++i) {
                const double v = x.get_f64(i);
                if (std::isnan(replaced) ? std::isnan(v) : v == replaced)
                    y.set_f64(i, column_value(imputed, i % cols));
            }
        } else {
            const auto imputed = n.attr_ints("imputed_value_int64s");
            check_columns(n, "imputed_value_int64s", imputed.size(), cols);
            const int64_t replaced = n.attr_int("replaced_value_int64", 0);
            for (int64_t i = 0; i < x.numel(); ++i)
                if (x.get_i64(i) == replaced)
                    y.set_i64(i, imputed.size() == 1 ? imputed[0]
                                                     : imputed[static_cast<size_t>(i % cols)]);
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

OpDef category_mapper_op() {
    OpDef d;
    d.name = "CategoryMapper";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {{"cats_int64s", AttrKind::kInts, std::nullopt, true},
               {"cats_strings", AttrKind::kStrings, std::nullopt, true},
               {"default_int64", AttrKind::kInt, ir::Attr(int64_t{-1})},
               {"default_string", AttrKind::kString, ir::Attr(std::string("_Unused"))}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, {DType::kString, DType::kInt64});
        return std::vector<ir::TensorType>{
            {x.dtype == DType::kString ? DType::kInt64 : DType::kString, x.shape}};
    };
    d.host = [](const HostArgs& a) {
        const ir::Node& n = a.node;
        const Tensor& x = a.tensor(0);
        check_dtype(n, "X", x.dtype(), {DType::kString, DType::kInt64});
        const auto ints = n.attr_ints("cats_int64s");
        std::vector<std::string> strs;
        if (const auto* s = std::get_if<std::vector<std::string>>(&n.attrs().at("cats_strings")))
            strs = *s;
        KILN_CHECK(ints.size() == strs.size(), kInvalidArgument)
            << n.describe() << ": cats_int64s has " << ints.size() << " entries but cats_strings "
            << strs.size();
        if (x.dtype() == DType::kString) {
            std::unordered_map<std::string, int64_t> m;
            for (size_t i = 0; i < strs.size(); ++i) m[strs[i]] = ints[i];
            const int64_t dflt = n.attr_int("default_int64", -1);
            Tensor y(DType::kInt64, x.shape());
            for (int64_t i = 0; i < x.numel(); ++i) {
                auto it = m.find(x.data_as<std::string>()[i]);
                y.data_as<int64_t>()[i] = it == m.end() ? dflt : it->second;
            }
            return std::vector<Datum>{std::move(y)};
        }
        std::unordered_map<int64_t, std::string> m;
        for (size_t i = 0; i < ints.size(); ++i) m[ints[i]] = strs[i];
        const std::string dflt = n.attr_string("default_string", "_Unused");
        Tensor y(DType::kString, x.shape());
        for (int64_t i = 0; i < x.numel(); ++i) {
            auto it = m.find(x.data_as<int64_t>()[i]);
            y.data_as<std::string>()[i] = it == m.end() ? dflt : it->second;
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

}  // namespace

void register_ml_ops(OpRegistry& r) {
    r.add(array_feature_extractor_op());
    r.add(binarizer_op());
    r.add(scaler_op());
    r.add(normalizer_op());
    r.add(imputer_op());
    r.add(category_mapper_op());
}

}  // namespace kiln::op
