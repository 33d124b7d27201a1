// ai.onnx.ml ArrayFeatureExtractor (1) and Binarizer (1): host kernels (op/host.h).
//
// ArrayFeatureExtractor: Z[..., k] = X[..., Y.flat[k]] — the flattened indices Y select
// elements of X's last axis. A 1-D X gives a [1, K] Z (what ONNX Runtime and the ONNX reference
// do). Indices must lie in [0, X.shape[-1]) (ONNX Runtime rejects the others too).
// Binarizer: Y = X > threshold ? 1 : 0 in X's dtype (NaN gives 0, like the ONNX reference).
#include <cstring>
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

}  // namespace

void register_ml_ops(OpRegistry& r) {
    r.add(array_feature_extractor_op());
    r.add(binarizer_op());
}

}  // namespace kiln::op
