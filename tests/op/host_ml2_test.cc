// Classic ai.onnx.ml host kernels: TreeEnsembleRegressor / TreeEnsembleClassifier (a two-tree
// ensemble walked on paper), LinearRegressor / LinearClassifier (the formulas spelled out),
// Scaler, Normalizer, Imputer, CategoryMapper (naive loops), and their error cases. The expected
// values are worked by hand in the comments; ONNX Runtime comparisons with random ensembles are
// in tests/models/test_ml_ops_vs_ort.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "support/error.h"

namespace kiln::op {
namespace {

using testing::doubles_of;
using testing::expect_error_kind;
using testing::ints_of;
using testing::make_strings;
using testing::make_tensor;
using testing::run_host;

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;
using Strs = std::vector<std::string>;

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     double tol = 1e-5) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// Two trees over X [N, 2]:
//  tree 0: node 0: x0 <= 0.5 (NaN goes true) ? node 1 : leaf 2 (w 10 -> target 0)
//          node 1: x1 < 2 ? leaf 3 (w 1 -> t0) : leaf 4 (w 2 -> t0)
//  tree 1: node 0: x1 == 3 ? leaf 1 (w 100 -> t0, w 5 -> t1) : leaf 2 (w 7 -> t1)
ir::AttrMap two_trees(const std::string& prefix) {
    ir::AttrMap a;
    a["nodes_treeids"] = Ints{0, 0, 0, 0, 0, 1, 1, 1};
    a["nodes_nodeids"] = Ints{0, 1, 2, 3, 4, 0, 1, 2};
    a["nodes_featureids"] = Ints{0, 1, 0, 0, 0, 1, 0, 0};
    a["nodes_modes"] = Strs{"BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF",
                            "BRANCH_EQ",  "LEAF",      "LEAF"};
    a["nodes_values"] = Floats{0.5, 2, 0, 0, 0, 3, 0, 0};
    a["nodes_truenodeids"] = Ints{1, 3, 0, 0, 0, 1, 0, 0};
    a["nodes_falsenodeids"] = Ints{2, 4, 0, 0, 0, 2, 0, 0};
    a["nodes_missing_value_tracks_true"] = Ints{1, 0, 0, 0, 0, 0, 0, 0};
    a[prefix + "_treeids"] = Ints{0, 0, 0, 1, 1, 1};
    a[prefix + "_nodeids"] = Ints{2, 3, 4, 1, 1, 2};
    a[prefix + "_ids"] = Ints{0, 0, 0, 0, 1, 1};
    a[prefix + "_weights"] = Floats{10, 1, 2, 100, 5, 7};
    return a;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows: [0, 1] -> tree 0 leaf 3 (t0 += 1), tree 1 leaf 2 (t1 += 7);
//       [1, 3] -> tree 0 leaf 2 (t0 += 10), tree 1 leaf 1 (t0 += 100, t1 += 5);
//       [NaN, 3] -> tree 0 true (missing) -> node 1: 3 < 2 false -> leaf 4 (t0 += 2);
//                   tree 1 leaf 1.
Tensor rows3() { return make_tensor(DType::kFloat32, {3, 2}, {0, 1, 1, 3, kNaN, 3}); }

TEST(HostTreeEnsembleRegressor, TwoTreesWalkedByHand) {
    ir::AttrMap a = two_trees("target");
    a["n_targets"] = int64_t{2};
    a["base_values"] = Floats{0.5, -0.5};
    auto sum = run_host("TreeEnsembleRegressor", {rows3()}, a);
    EXPECT_EQ(sum[0].tensor().dtype(), DType::kFloat32);
    EXPECT_EQ(sum[0].tensor().shape(), (Shape{3, 2}));
    expect_near_all(doubles_of(sum[0]), {1.5, 6.5, 110.5, 4.5, 102.5, 4.5});

    a.erase("base_values");
    a["aggregate_function"] = std::string("AVERAGE");
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]),
                    {0.5, 3.5, 55, 2.5, 51, 2.5});
    a["aggregate_function"] = std::string("MIN");
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]),
                    {1, 7, 10, 5, 2, 5});
    a["aggregate_function"] = std::string("MAX");
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]),
                    {1, 7, 100, 5, 100, 5});
    a["aggregate_function"] = std::string("SUM");
    a["post_transform"] = std::string("LOGISTIC");
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]),
                    {sigmoid(1), sigmoid(7), sigmoid(110), sigmoid(5), sigmoid(102), sigmoid(5)});
    a["post_transform"] = std::string("SOFTMAX");
    const double e = std::exp(-6.0);  // row 0: softmax([1, 7])
    auto sm = doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]);
    EXPECT_NEAR(sm[0], e / (1 + e), 1e-6);
    EXPECT_NEAR(sm[1], 1 / (1 + e), 1e-6);
}

TEST(HostTreeEnsembleRegressor, SingleTargetIgnoresLogisticAndTakesTensorAttrs) {
    // Only target 0: the leaf weights of t1 are dropped by re-pointing them at t0 of tree 1.
    ir::AttrMap a = two_trees("target");
    a["target_ids"] = Ints{0, 0, 0, 0, 0, 0};
    a["post_transform"] = std::string("LOGISTIC");  // ONNX Runtime: no effect on one target
    // Row [0, 1]: 1 + 7 = 8; row [1, 3]: 10 + 100 + 5 = 115; row [NaN, 3]: 2 + 105 = 107.
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {rows3()}, a)[0]), {8, 115, 107});
    // Version 3: thresholds and weights as f64 tensors, the same ensemble.
    Tensor vals = make_tensor(DType::kFloat64, {8}, {0.5, 2, 0, 0, 0, 3, 0, 0});
    Tensor w = make_tensor(DType::kFloat64, {6}, {10, 1, 2, 100, 5, 7});
    a.erase("nodes_values");
    a.erase("target_weights");
    a["nodes_values_as_tensor"] = vals;
    a["target_weights_as_tensor"] = w;
    a["post_transform"] = std::string("NONE");
    Tensor x64 = make_tensor(DType::kFloat64, {3, 2}, {0, 1, 1, 3, kNaN, 3});
    expect_near_all(doubles_of(run_host("TreeEnsembleRegressor", {x64}, a)[0]), {8, 115, 107});
    // Both spellings at once is a malformed model.
    a["nodes_values"] = Floats{0.5, 2, 0, 0, 0, 3, 0, 0};
    expect_error_kind([&] { run_host("TreeEnsembleRegressor", {x64}, a); },
                      ErrorKind::kInvalidModel);
}

TEST(HostTreeEnsembleClassifier, MultiClassArgmaxAndSoftmax) {
    // Class ids as the regressor's targets, plus class 2 never weighted: 3 labels.
    ir::AttrMap a = two_trees("class");
    a["classlabels_int64s"] = Ints{10, 20, 30};
    // Scores: row 0 [1, 7, 0] -> 20; row 1 [110, 5, 0] -> 10; row 2 [102, 5, 0] -> 10.
    auto out = run_host("TreeEnsembleClassifier", {rows3()}, a, 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{20, 10, 10}));
    EXPECT_EQ(out[1].tensor().shape(), (Shape{3, 3}));
    expect_near_all(doubles_of(out[1]), {1, 7, 0, 110, 5, 0, 102, 5, 0});
    // base_values make class 2 win row 0: [1.5, 7, 8].
    a["base_values"] = Floats{0.5, 0, 8};
    a["post_transform"] = std::string("SOFTMAX");
    out = run_host("TreeEnsembleClassifier", {rows3()}, a, 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{30, 10, 10}));
    const double z = std::exp(1.5) + std::exp(7) + std::exp(8);
    auto zs = doubles_of(out[1]);
    EXPECT_NEAR(zs[0], std::exp(1.5) / z, 1e-6);
    EXPECT_NEAR(zs[2], std::exp(8) / z, 1e-6);
    // String labels.
    a.erase("classlabels_int64s");
    a["classlabels_strings"] = Strs{"a", "b", "c"};
    out = run_host("TreeEnsembleClassifier", {rows3()}, a, 2);
    ASSERT_EQ(out[0].tensor().dtype(), DType::kString);
    EXPECT_EQ(out[0].tensor().data_as<std::string>()[0], "c");
    EXPECT_EQ(out[0].tensor().data_as<std::string>()[1], "a");
}

// One tree: x0 <= 0 ? leaf 1 : leaf 2, weights on class 0 only (ONNX Runtime's binary case).
ir::AttrMap binary_tree(double w1, double w2) {
    ir::AttrMap a;
    a["nodes_treeids"] = Ints{0, 0, 0};
    a["nodes_nodeids"] = Ints{0, 1, 2};
    a["nodes_featureids"] = Ints{0, 0, 0};
    a["nodes_modes"] = Strs{"BRANCH_LEQ", "LEAF", "LEAF"};
    a["nodes_values"] = Floats{0, 0, 0};
    a["nodes_truenodeids"] = Ints{1, 0, 0};
    a["nodes_falsenodeids"] = Ints{2, 0, 0};
    a["class_treeids"] = Ints{0, 0};
    a["class_nodeids"] = Ints{1, 2};
    a["class_ids"] = Ints{0, 0};
    a["class_weights"] = Floats{w1, w2};
    a["classlabels_int64s"] = Ints{3, 7};
    return a;
}

TEST(HostTreeEnsembleClassifier, BinaryCaseLikeOnnxRuntime) {
    Tensor x = make_tensor(DType::kFloat32, {2, 1}, {-1, 1});
    // All weights >= 0: label by s > 0.5, Z = [1 - s, s]. s = 0.3 / 0.9.
    auto out = run_host("TreeEnsembleClassifier", {x}, binary_tree(0.3, 0.9), 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{3, 7}));
    expect_near_all(doubles_of(out[1]), {0.7, 0.3, 0.1, 0.9});
    // A negative weight: label by s > 0, Z = [-s, s]; LOGISTIC: [sig(-s), sig(s)].
    out = run_host("TreeEnsembleClassifier", {x}, binary_tree(-0.3, 0.9), 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{3, 7}));
    expect_near_all(doubles_of(out[1]), {0.3, -0.3, -0.9, 0.9});
    ir::AttrMap a = binary_tree(-0.3, 0.9);
    a["post_transform"] = std::string("LOGISTIC");
    a["base_values"] = Floats{0.5};  // s = 0.2 / 1.4
    out = run_host("TreeEnsembleClassifier", {x}, a, 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{7, 7}));
    expect_near_all(doubles_of(out[1]), {sigmoid(-0.2), sigmoid(0.2), sigmoid(-1.4), sigmoid(1.4)});
}

TEST(HostTreeEnsembleClassifier, BadEnsemblesAreErrors) {
    Tensor x = make_tensor(DType::kFloat32, {2, 1}, {-1, 1});
    auto expect_bad = [&](ir::AttrMap a, ErrorKind k = ErrorKind::kInvalidArgument) {
        expect_error_kind([&] { run_host("TreeEnsembleClassifier", {x}, a, 2); }, k);
    };
    ir::AttrMap a = binary_tree(1, 2);
    a["nodes_modes"] = Strs{"BRANCH_XX", "LEAF", "LEAF"};
    expect_bad(a);
    a = binary_tree(1, 2);
    a["nodes_truenodeids"] = Ints{5, 0, 0};  // no node 5 in tree 0
    expect_bad(a);
    a = binary_tree(1, 2);
    a["nodes_featureids"] = Ints{1, 0, 0};  // X has one feature
    expect_bad(a);
    a = binary_tree(1, 2);
    a["nodes_modes"] = Strs{"BRANCH_LEQ", "BRANCH_LEQ", "LEAF"};  // node 1 loops to node 0
    a["class_nodeids"] = Ints{2, 2};
    expect_bad(a);
    a = binary_tree(1, 2);
    a["class_nodeids"] = Ints{0, 2};  // weight on an interior node
    expect_bad(a);
    a = binary_tree(1, 2);
    a["class_ids"] = Ints{0, 2};  // two labels only
    expect_bad(a);
    a = binary_tree(1, 2);
    a["class_weights"] = Floats{1};
    expect_bad(a);
    a = binary_tree(1, 2);
    a["post_transform"] = std::string("SQUASH");
    expect_bad(a);
    a = binary_tree(1, 2);
    a["classlabels_int64s"] = Ints{3};
    expect_bad(a, ErrorKind::kUnsupported);
    a = binary_tree(1, 2);
    a["classlabels_strings"] = Strs{"a", "b"};  // both label kinds
    expect_bad(a, ErrorKind::kInvalidModel);
    a = binary_tree(1, 2);
    a["nodes_nodeids"] = Ints{0, 1, 1};
    expect_bad(a);
    ir::AttrMap r = two_trees("target");
    r["aggregate_function"] = std::string("MEDIAN");
    expect_error_kind([&] { run_host("TreeEnsembleRegressor", {rows3()}, r); },
                      ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("TreeEnsembleRegressor", {make_strings({1, 2}, {"a", "b"})},
                     two_trees("target"));
        },
        ErrorKind::kUnsupported);
}

// ---------------------------------------------------------------------------------------------
// Linear models

TEST(HostLinearRegressor, FormulaSpelledOut) {
    // Y[n, t] = sum_c X[n, c] * W[t, c] + b[t], W = [[0.1, 0.2], [-0.3, 0.4]], b = [0.3, 0.1].
    Tensor x = make_tensor(DType::kFloat32, {2, 2}, {1, -2, 0.5, 0.25});
    ir::AttrMap a;
    a["coefficients"] = Floats{0.1, 0.2, -0.3, 0.4};
    a["intercepts"] = Floats{0.3, 0.1};
    a["targets"] = int64_t{2};
    auto y = run_host("LinearRegressor", {x}, a);
    EXPECT_EQ(y[0].tensor().shape(), (Shape{2, 2}));
    expect_near_all(doubles_of(y[0]), {0.1 - 0.4 + 0.3, -0.3 - 0.8 + 0.1, 0.05 + 0.05 + 0.3,
                                       -0.15 + 0.1 + 0.1});
    a["post_transform"] = std::string("LOGISTIC");
    expect_near_all(doubles_of(run_host("LinearRegressor", {x}, a)[0]),
                    {sigmoid(0), sigmoid(-1), sigmoid(0.4), sigmoid(0.05)});
    // One target, int64 X: LOGISTIC has no effect (ONNX Runtime).
    ir::AttrMap one;
    one["coefficients"] = Floats{0.5, 2};
    one["intercepts"] = Floats{1};
    one["post_transform"] = std::string("LOGISTIC");
    Tensor xi = make_tensor(DType::kInt64, {1, 2}, {4, -1});
    expect_near_all(doubles_of(run_host("LinearRegressor", {xi}, one)[0]), {0.5 * 4 - 2 + 1});
    one["coefficients"] = Floats{0.5, 2, 3};
    expect_error_kind([&] { run_host("LinearRegressor", {x}, one); }, ErrorKind::kInvalidArgument);
}

TEST(HostLinearClassifier, MultiClassAndBinary) {
    Tensor x = make_tensor(DType::kFloat32, {2, 2}, {1, -2, 0.5, 0.25});
    ir::AttrMap a;
    a["coefficients"] = Floats{0.1, 0.2, -0.3, 0.4, 0, 0};
    a["intercepts"] = Floats{0.3, 0.1, 0.2};
    a["classlabels_ints"] = Ints{3, 7, 9};
    // Scores: row 0 [0, -1, 0.2] -> 9; row 1 [0.4, 0.05, 0.2] -> 3.
    auto out = run_host("LinearClassifier", {x}, a, 2);
    EXPECT_EQ(ints_of(out[0]), (Ints{9, 3}));
    expect_near_all(doubles_of(out[1]), {0, -1, 0.2, 0.4, 0.05, 0.2});
    // Binary: one coefficient row, s = 0.1 x0 + 0.2 x1 + 0.3: row 0 s = 0 -> label 3,
    // row 1 s = 0.4 -> label 7; Z = [1 - s, s], LOGISTIC: [1 - sig(s), sig(s)].
    ir::AttrMap b;
    b["coefficients"] = Floats{0.1, 0.2};
    b["intercepts"] = Floats{0.3};
    b["classlabels_strings"] = Strs{"no", "yes"};
    out = run_host("LinearClassifier", {x}, b, 2);
    EXPECT_EQ(out[0].tensor().data_as<std::string>()[0], "no");
    EXPECT_EQ(out[0].tensor().data_as<std::string>()[1], "yes");
    expect_near_all(doubles_of(out[1]), {1, 0, 0.6, 0.4});
    b["post_transform"] = std::string("LOGISTIC");
    out = run_host("LinearClassifier", {x}, b, 2);
    expect_near_all(doubles_of(out[1]), {0.5, 0.5, 1 - sigmoid(0.4), sigmoid(0.4)});
    // Errors: label count, coefficient count.
    a["classlabels_ints"] = Ints{3, 7};
    expect_error_kind([&] { run_host("LinearClassifier", {x}, a, 2); },
                      ErrorKind::kInvalidArgument);
    a["classlabels_ints"] = Ints{3, 7, 9};
    a["coefficients"] = Floats{0.1, 0.2, -0.3, 0.4, 0};
    expect_error_kind([&] { run_host("LinearClassifier", {x}, a, 2); },
                      ErrorKind::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Scaler, Normalizer, Imputer, CategoryMapper

TEST(HostScaler, PerColumnAndBroadcast) {
    Tensor x = make_tensor(DType::kInt32, {2, 2}, {1, -2, 3, 4});
    ir::AttrMap a;
    a["offset"] = Floats{1, 2};
    a["scale"] = Floats{2, 3};
    auto y = run_host("Scaler", {x}, a);
    EXPECT_EQ(y[0].tensor().dtype(), DType::kFloat32);
    expect_near_all(doubles_of(y[0]), {0, -12, 4, 6});
    a["offset"] = Floats{1};
    a["scale"] = Floats{0.5};
    expect_near_all(doubles_of(run_host("Scaler", {x}, a)[0]), {0, -1.5, 1, 1.5});
    a["scale"] = Floats{1, 2, 3};
    expect_error_kind([&] { run_host("Scaler", {x}, a); }, ErrorKind::kInvalidArgument);
}

TEST(HostNormalizer, MaxL1L2) {
    Tensor x = make_tensor(DType::kFloat64, {3, 2}, {1, -2, -0.5, -0.25, 0, 0});
    ir::AttrMap a;
    a["norm"] = std::string("MAX");  // divides by the largest value (-0.25 in row 1)
    expect_near_all(doubles_of(run_host("Normalizer", {x}, a)[0]), {1, -2, 2, 1, 0, 0});
    a["norm"] = std::string("L1");
    expect_near_all(doubles_of(run_host("Normalizer", {x}, a)[0]),
                    {1 / 3.0, -2 / 3.0, -2 / 3.0, -1 / 3.0, 0, 0});
    a["norm"] = std::string("L2");
    const double r0 = std::sqrt(5.0), r1 = std::sqrt(0.3125);
    expect_near_all(doubles_of(run_host("Normalizer", {x}, a)[0]),
                    {1 / r0, -2 / r0, -0.5 / r1, -0.25 / r1, 0, 0});
    a["norm"] = std::string("L3");
    expect_error_kind([&] { run_host("Normalizer", {x}, a); }, ErrorKind::kInvalidArgument);
}

TEST(HostImputer, FloatNaNAndIntegers) {
    Tensor x = make_tensor(DType::kFloat32, {2, 2}, {1, kNaN, kNaN, 3});
    ir::AttrMap a;
    a["imputed_value_floats"] = Floats{5, 6};
    a["replaced_value_float"] = kNaN;
    auto y = run_host("Imputer", {x}, a);
    EXPECT_EQ(y[0].tensor().dtype(), DType::kFloat32);
    expect_near_all(doubles_of(y[0]), {1, 6, 5, 3});
    ir::AttrMap b;
    b["imputed_value_int64s"] = Ints{5, 6};
    b["replaced_value_int64"] = int64_t{1};
    Tensor xi = make_tensor(DType::kInt64, {2, 2}, {1, 2, 1, 1});
    EXPECT_EQ(ints_of(run_host("Imputer", {xi}, b)[0]), (Ints{5, 2, 5, 6}));
    b["imputed_value_int64s"] = Ints{5, 6, 7};
    expect_error_kind(
        [&] { run_host("Imputer", {make_tensor(DType::kInt64, {2, 2}, {1, 2, 1, 1})}, b); },
        ErrorKind::kInvalidArgument);
}

TEST(HostCategoryMapper, BothDirections) {
    ir::AttrMap a;
    a["cats_int64s"] = Ints{1, 2};
    a["cats_strings"] = Strs{"a", "b"};
    auto s = run_host("CategoryMapper", {make_tensor(DType::kInt64, {2, 2}, {1, 3, 2, 2})}, a);
    ASSERT_EQ(s[0].tensor().dtype(), DType::kString);
    const std::string* sv = s[0].tensor().data_as<std::string>();
    EXPECT_EQ((Strs{sv[0], sv[1], sv[2], sv[3]}), (Strs{"a", "_Unused", "b", "b"}));
    a["default_int64"] = int64_t{42};
    EXPECT_EQ(ints_of(run_host("CategoryMapper", {make_strings({3}, {"b", "z", "a"})}, a)[0]),
              (Ints{2, 42, 1}));
    expect_error_kind(
        [&] { run_host("CategoryMapper", {make_tensor(DType::kFloat32, {1}, {1})}, a); },
        ErrorKind::kUnsupported);
    a["cats_int64s"] = Ints{1};
    expect_error_kind(
        [&] { run_host("CategoryMapper", {make_strings({1}, {"a"})}, a); },
        ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::op
