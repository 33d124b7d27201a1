// ai.onnx.ml LinearRegressor (1) and LinearClassifier (1): host kernels (op/host.h) over X [N, C]
// (a 1-D X is one row) of f32 f64 i64 i32; arithmetic in double, outputs f32.
//
// LinearRegressor: Y[n, t] = sum_c X[n, c] * coefficients[t * C + c] + intercepts[t] for the
//   `targets` (default 1) targets, then post_transform per row; with one target only PROBIT
//   applies (ONNX Runtime ignores the others there).
// LinearClassifier: scores S[n, e] = sum_c X[n, c] * coefficients[e * C + c] + intercepts[e] for
//   E = len(intercepts) classes (coefficients / C without intercepts). E >= 2: there must be E
//   labels (classlabels_ints or classlabels_strings); the label is the first class of highest
//   score; Z = post_transform(S). E == 1 (binary): there must be two labels; the label is
//   labels[1] when the score s > 0, else labels[0]; with p = s transformed (LOGISTIC: 1/(1+e^-s),
//   PROBIT: probit(s), otherwise s) Z[n] = [1 - p, p] — ONNX Runtime's layout (its PROBIT binary
//   output is malformed; Kiln keeps the same rule). multi_class is accepted and, like in ONNX
//   Runtime, does not change the result.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "op/defs/ml_tree_core.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const std::vector<DType>& x_types() {
    static const std::vector<DType> t{DType::kFloat32, DType::kFloat64, DType::kInt64,
                                      DType::kInt32};
    return t;
}

struct Rows {
    int64_t rows = 0, cols = 0;
    std::vector<double> x;
};

Rows read_rows(const ir::Node& n, const Tensor& x) {
    check_dtype(n, "X", x.dtype(), x_types());
    KILN_CHECK(x.shape().size() == 1 || x.shape().size() == 2, kInvalidArgument)
        << n.describe() << ": X must have shape [N, C] (or [C]), got " << shape_str(x.shape());
    Rows r;
    r.rows = x.shape().size() == 2 ? x.shape()[0] : 1;
    r.cols = x.shape().back();
    r.x.resize(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) r.x[static_cast<size_t>(i)] = x.get_f64(i);
    return r;
}

// S[n, e] = X[n, :] . coef[e, :] + intercepts[e] (intercepts may be empty: 0).
std::vector<double> linear_scores(const ir::Node& n, const Rows& x, int64_t outs,
                                  const std::vector<double>& coef,
                                  const std::vector<double>& intercepts) {
    KILN_CHECK(static_cast<int64_t>(coef.size()) == outs * x.cols, kInvalidArgument)
        << n.describe() << ": coefficients has " << coef.size() << " entries, expected " << outs
        << " x " << x.cols << " (outputs x features of X)";
    KILN_CHECK(intercepts.empty() || static_cast<int64_t>(intercepts.size()) == outs,
               kInvalidArgument)
        << n.describe() << ": intercepts has " << intercepts.size() << " entries, expected "
        << outs;
    std::vector<double> s(static_cast<size_t>(x.rows * outs));
    for (int64_t r = 0; r < x.rows; ++r)
        for (int64_t e = 0; e < outs; ++e) {
            double acc = intercepts.empty() ? 0.0 : intercepts[static_cast<size_t>(e)];
            for (int64_t c = 0; c < x.cols; ++c)
                acc += x.x[static_cast<size_t>(r * x.cols + c)] *
                       coef[static_cast<size_t>(e * x.cols + c)];
            s[static_cast<size_t>(r * outs + e)] = acc;
        }
    return s;
}

ir::Dim rows_of(const ir::TensorType& x) { return x.rank() == 2 ? x.shape[0] : ir::Dim(1); }

OpDef linear_regressor_op() {
    OpDef d;
    d.name = "LinearRegressor";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.attrs = {
        {"coefficients", AttrKind::kFloats, std::nullopt},
        {"intercepts", AttrKind::kFloats, std::nullopt},
        {"post_transform", AttrKind::kString, ir::Attr(std::string("NONE"))},
        {"targets", AttrKind::kInt, ir::Attr(int64_t{1})},
    };
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, x_types());
        return std::vector<ir::TensorType>{
            {DType::kFloat32, {rows_of(x), ir::Dim(n.attr_int("targets", 1))}}};
    };
    d.host = [](const HostArgs& a) {
        const ir::Node& n = a.node;
        const Rows x = read_rows(n, a.tensor(0));
        const int64_t t = n.attr_int("targets", 1);
        KILN_CHECK(t >= 1, kInvalidArgument) << n.describe() << ": targets must be >= 1, got " << t;
        const int64_t post = ml::parse_post_transform(n, n.attr_string("post_transform", "NONE"));
        std::vector<double> s =
            linear_scores(n, x, t, n.attr_floats("coefficients"), n.attr_floats("intercepts"));
        Tensor y(DType::kFloat32, {x.rows, t});
        for (int64_t r = 0; r < x.rows; ++r) {
            double* v = s.data() + r * t;
            if (t >= 2) ml::tree_post_transform(post, v, t);
            else if (post == ml::kProbit) v[0] = ml::probit(v[0]);
            for (int64_t j = 0; j < t; ++j)
                y.data_as<float>()[r * t + j] = static_cast<float>(v[j]);
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

struct ClassLabels {
    std::vector<int64_t> ints;
    std::vector<std::string> strings;
    bool is_string = false;
    int64_t size() const { return static_cast<int64_t>(is_string ? strings.size() : ints.size()); }
};

ClassLabels linear_labels(const ir::Node& n) {
    ClassLabels l;
    const bool has_ints = n.has_attr("classlabels_ints");
    l.is_string = n.has_attr("classlabels_strings");
    KILN_CHECK(has_ints != l.is_string, kInvalidModel)
        << n.describe() << ": expected exactly one of classlabels_ints / classlabels_strings";
    if (has_ints) {
        l.ints = n.attr_ints("classlabels_ints");
    } else if (const auto* s =
                   std::get_if<std::vector<std::string>>(&n.attrs().at("classlabels_strings"))) {
        l.strings = *s;
    }
    return l;
}

std::vector<Datum> linear_classifier_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    const Rows x = read_rows(n, a.tensor(0));
    const ClassLabels labels = linear_labels(n);
    const auto coef = n.attr_floats("coefficients");
    const auto intercepts = n.attr_floats("intercepts");
    KILN_CHECK(x.cols > 0 || !intercepts.empty(), kInvalidArgument)
        << n.describe() << ": cannot tell the class count: X has no feature and no intercepts";
    const int64_t e = !intercepts.empty() ? static_cast<int64_t>(intercepts.size())
                                          : static_cast<int64_t>(coef.size()) / x.cols;
    KILN_CHECK(e >= 1, kInvalidArgument) << n.describe() << ": coefficients is empty";
    const int64_t want_labels = e == 1 ? 2 : e;
    KILN_CHECK(labels.size() == want_labels, kInvalidArgument)
        << n.describe() << ": expected " << want_labels << " class labels for " << e
        << " coefficient row(s), got " << labels.size();
    const int64_t post = ml::parse_post_transform(n, n.attr_string("post_transform", "NONE"));
    std::vector<double> s = linear_scores(n, x, e, coef, intercepts);

    const int64_t zc = e == 1 ? 2 : e;
    Tensor y(labels.is_string ? DType::kString : DType::kInt64, {x.rows});
    Tensor z(DType::kFloat32, {x.rows, zc});
    for (int64_t r = 0; r < x.rows; ++r) {
        double* v = s.data() + r * e;
        int64_t best = 0;
        if (e == 1) {
            best = v[0] > 0 ? 1 : 0;
        } else {
            for (int64_t k = 1; k < e; ++k)
                if (v[k] > v[best]) best = k;
        }
        const auto ub = static_cast<size_t>(best);
        if (labels.is_string) y.data_as<std::string>()[r] = labels.strings[ub];
        else y.data_as<int64_t>()[r] = labels.ints[ub];
        float* zr = z.data_as<float>() + r * zc;
        if (e == 1) {
            double p = v[0];
            if (post == ml::kLogistic) p = 1 / (1 + std::exp(-p));
            else if (post == ml::kProbit) p = ml::probit(p);
            zr[0] = static_cast<float>(1 - p);
            zr[1] = static_cast<float>(p);
        } else {
            ml::tree_post_transform(post, v, e);
            for (int64_t k = 0; k < e; ++k) zr[k] = static_cast<float>(v[k]);
        }
    }
    return {std::move(y), std::move(z)};
}

OpDef linear_classifier_op() {
    OpDef d;
    d.name = "LinearClassifier";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1};
    d.min_outputs = d.max_outputs = 2;
    d.attrs = {
        {"classlabels_ints", AttrKind::kInts, std::nullopt},
        {"classlabels_strings", AttrKind::kStrings, std::nullopt},
        {"coefficients", AttrKind::kFloats, std::nullopt, true},
        {"intercepts", AttrKind::kFloats, std::nullopt},
        {"multi_class", AttrKind::kInt, ir::Attr(int64_t{0})},
        {"post_transform", AttrKind::kString, ir::Attr(std::string("NONE"))},
    };
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, x_types());
        const ClassLabels l = linear_labels(n);
        const ir::Dim rows = rows_of(x);
        return std::vector<ir::TensorType>{
            {l.is_string ? DType::kString : DType::kInt64, {rows}},
            {DType::kFloat32, {rows, ir::Dim(l.size())}}};
    };
    d.host = linear_classifier_host;
    return d;
}

}  // namespace

void register_ml_linear_ops(OpRegistry& r) {
    r.add(linear_regressor_op());
    r.add(linear_classifier_op());
}

}  // namespace kiln::op
