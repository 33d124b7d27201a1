// ai.onnx.ml host kernels: ArrayFeatureExtractor, Binarizer, TreeEnsemble. References: naive
// loops written here, and trees evaluated by hand (the two ensembles of the ONNX backend node
// tests tree_ensemble_single_tree / tree_ensemble_set_membership, walked on paper).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "support/error.h"

namespace kiln::op {
namespace {

using testing::make_strings;
using testing::make_tensor;
using testing::run_host;
using testing::expect_error_kind;
using testing::doubles_of;

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// ---------------------------------------------------------------------------------------------
// ArrayFeatureExtractor

TEST(HostArrayFeatureExtractor, GathersLastAxisLikeNaiveLoop) {
    std::vector<double> xv;
    for (int i = 0; i < 24; ++i) xv.push_back(i * 1.5 - 7);
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
        Tensor x = make_tensor(t, {2, 3, 4}, xv);
        Tensor idx = make_tensor(DType::kInt64, {1, 3}, {3, 0, 3});
        auto out = run_host("ArrayFeatureExtractor", {x, idx});
        ASSERT_EQ(out[0].tensor().shape(), (Shape{2, 3, 3}));
        std::vector<double> want;
        for (int r = 0; r < 6; ++r)
            for (int j : {3, 0, 3}) want.push_back(x.get_f64(r * 4 + j));
        EXPECT_EQ(doubles_of(out[0]), want) << dtype_name(t);
    }
    // A 1-D X gives [1, K] (ONNX Runtime's and the ONNX reference's shape).
    auto v =
        run_host("ArrayFeatureExtractor", {make_tensor(DType::kFloat32, {5}, {10, 11, 12, 13, 14}),
                                           make_tensor(DType::kInt64, {2}, {4, 1})});
    EXPECT_EQ(v[0].tensor().shape(), (Shape{1, 2}));
    EXPECT_EQ(doubles_of(v[0]), (std::vector<double>{14, 11}));
    // Strings.
    auto s = run_host("ArrayFeatureExtractor", {make_strings({2, 2}, {"a", "b", "c", "d"}),
                                                make_tensor(DType::kInt64, {1}, {1})});
    ASSERT_EQ(s[0].tensor().shape(), (Shape{2, 1}));
    EXPECT_EQ(s[0].tensor().data_as<std::string>()[0], "b");
    EXPECT_EQ(s[0].tensor().data_as<std::string>()[1], "d");
}

TEST(HostArrayFeatureExtractor, BadIndicesAndDtypes) {
    Tensor x = make_tensor(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
    expect_error_kind(
        [&] {
            run_host("ArrayFeatureExtractor", {x, make_tensor(DType::kInt64, {1}, {3})});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("ArrayFeatureExtractor", {x, make_tensor(DType::kInt64, {1}, {-1})});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("ArrayFeatureExtractor", {x, make_tensor(DType::kInt32, {1}, {0})});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("ArrayFeatureExtractor", {x, Tensor(DType::kInt64, {0})});
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("ArrayFeatureExtractor", {make_tensor(DType::kInt8, {2}, {1, 2}),
                                               make_tensor(DType::kInt64, {1}, {0})});
        },
        ErrorKind::kUnsupported);
}

// ---------------------------------------------------------------------------------------------
// Binarizer

TEST(HostBinarizer, ThresholdsLikeNaiveLoop) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<double> dist(-3, 3);
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
        std::vector<double> xv;
        for (int i = 0; i < 30; ++i)
            xv.push_back(dtype_is_float(t) ? dist(rng) : std::round(dist(rng)));
        Tensor x = make_tensor(t, {5, 6}, xv);
        auto out = run_host("Binarizer", {x}, {{"threshold", 0.5}});
        EXPECT_EQ(out[0].tensor().dtype(), t);
        std::vector<double> want;
        for (int64_t i = 0; i < 30; ++i) want.push_back(x.get_f64(i) > 0.5 ? 1.0 : 0.0);
        EXPECT_EQ(doubles_of(out[0]), want) << dtype_name(t);
    }
    // Default threshold 0; NaN gives 0 (like the ONNX reference: NaN > t is false).
    auto d = run_host("Binarizer", {make_tensor(DType::kFloat32, {4}, {-1, 0, 2, std::nan("")})});
    EXPECT_EQ(doubles_of(d[0]), (std::vector<double>{0, 0, 1, 0}));
    expect_error_kind(
        [] {
            run_host("Binarizer", {make_tensor(DType::kUInt8, {2}, {1, 2})});
        },
        ErrorKind::kUnsupported);
}

// ---------------------------------------------------------------------------------------------
// TreeEnsemble

Tensor u8s(const std::vector<double>& v) {
    return make_tensor(DType::kUInt8, {static_cast<int64_t>(v.size())}, v);
}
Tensor f64s(const std::vector<double>& v) {
    return make_tensor(DType::kFloat64, {static_cast<int64_t>(v.size())}, v);
}
Tensor f32s(const std::vector<double>& v) {
    return make_tensor(DType::kFloat32, {static_cast<int64_t>(v.size())}, v);
}

// The node test's single tree: node0 x0 <= 3.14 ? node1 : node2; node1 x0 <= 1.2 ? leaf0 : leaf2;
// node2 x0 <= 4.2 ? leaf1 : leaf3; leaves (5.23, t0) (12.12, t1) (-12.23, t0) (7.21, t1).
ir::AttrMap single_tree_attrs() {
    return {{"aggregate_function", int64_t{1}},
            {"leaf_targetids", std::vector<int64_t>{0, 1, 0, 1}},
            {"leaf_weights", f64s({5.23, 12.12, -12.23, 7.21})},
            {"n_targets", int64_t{2}},
            {"nodes_falseleafs", std::vector<int64_t>{0, 1, 1}},
            {"nodes_falsenodeids", std::vector<int64_t>{2, 2, 3}},
            {"nodes_featureids", std::vector<int64_t>{0, 0, 0}},
            {"nodes_modes", u8s({0, 0, 0})},
            {"nodes_splits", f64s({3.14, 1.2, 4.2})},
            {"nodes_trueleafs", std::vector<int64_t>{0, 1, 1}},
            {"nodes_truenodeids", std::vector<int64_t>{1, 0, 1}},
            {"post_transform", int64_t{0}},
            {"tree_roots", std::vector<int64_t>{0}}};
}

TEST(HostTreeEnsemble, SingleTreeByHand) {
    // Rows (x0, x1): 1.2 -> leaf0; 2.0 -> leaf2; 3.4 -> leaf1; 5.0 -> leaf3.
    Tensor x = make_tensor(DType::kFloat64, {4, 2}, {1.2, 9, 2.0, 9, 3.4, 9, 5.0, 9});
    auto out = run_host("TreeEnsemble", {x}, single_tree_attrs());
    ASSERT_EQ(out[0].tensor().shape(), (Shape{4, 2}));
    EXPECT_EQ(doubles_of(out[0]), (std::vector<double>{5.23, 0, -12.23, 0, 0, 12.12, 0, 7.21}));
}

TEST(HostTreeEnsemble, SetMembershipByHand) {
    // node0 x <= 11 ? node1 : leaf2; node1 x in {1.2, 3.7, 8, 9} ? leaf0 : node2;
    // node2 x in {12, 7} ? leaf1 : leaf3; leaves 1 (t0), 10 (t1), 1000 (t2), 100 (t3).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    ir::AttrMap attrs{{"aggregate_function", int64_t{1}},
                      {"leaf_targetids", std::vector<int64_t>{0, 1, 2, 3}},
                      {"leaf_weights", f32s({1, 10, 1000, 100})},
                      {"membership_values", f32s({1.2, 3.7, 8, 9, nan, 12, 7, nan})},
                      {"n_targets", int64_t{4}},
                      {"nodes_falseleafs", std::vector<int64_t>{1, 0, 1}},
                      {"nodes_falsenodeids", std::vector<int64_t>{2, 2, 3}},
                      {"nodes_featureids", std::vector<int64_t>{0, 0, 0}},
                      {"nodes_modes", u8s({0, 6, 6})},
                      {"nodes_splits", f32s({11, 232344, nan})},
                      {"nodes_trueleafs", std::vector<int64_t>{0, 1, 1}},
                      {"nodes_truenodeids", std::vector<int64_t>{1, 0, 1}},
                      {"tree_roots", std::vector<int64_t>{0}}};
    Tensor x = make_tensor(DType::kFloat32, {6, 1}, {1.2, 3.7, 7, 12, 5, nan});
    auto out = run_host("TreeEnsemble", {x}, attrs);
    ASSERT_EQ(out[0].tensor().shape(), (Shape{6, 4}));
    EXPECT_EQ(doubles_of(out[0]),
              (std::vector<double>{1, 0, 0,    0, 1, 0, 0, 0,   0, 10, 0,    0,
                                   0, 0, 1000, 0, 0, 0, 0, 100, 0, 0,  1000, 0}));
    // A NaN feature takes the true branch where nodes_missing_value_tracks_true says so:
    // node0 true -> node1 true -> leaf0.
    attrs["nodes_missing_value_tracks_true"] = std::vector<int64_t>{1, 1, 0};
    auto nan_out = run_host("TreeEnsemble", {make_tensor(DType::kFloat32, {1, 1}, {nan})}, attrs);
    EXPECT_EQ(doubles_of(nan_out[0]), (std::vector<double>{1, 0, 0, 0}));
}

// Three stumps on feature f_t: x[f_t] < s_t ? leaf (a_t, target 0) : leaf (b_t, target 1).
ir::AttrMap stumps(int64_t aggregate, int64_t post) {
    return {{"aggregate_function", aggregate},
            {"leaf_targetids", std::vector<int64_t>{0, 1, 0, 1, 0, 1}},
            {"leaf_weights", f32s({1.5, -2, 0.25, 3, -1, 0.5})},
            {"n_targets", int64_t{2}},
            {"nodes_falseleafs", std::vector<int64_t>{1, 1, 1}},
            {"nodes_falsenodeids", std::vector<int64_t>{1, 3, 5}},
            {"nodes_featureids", std::vector<int64_t>{0, 1, 2}},
            {"nodes_modes", u8s({1, 3, 5})},  // LT, GT, NEQ
            {"nodes_splits", f32s({0, 0.5, 2})},
            {"nodes_trueleafs", std::vector<int64_t>{1, 1, 1}},
            {"nodes_truenodeids", std::vector<int64_t>{0, 2, 4}},
            {"post_transform", post},
            {"tree_roots", std::vector<int64_t>{0, 1, 2}}};
}

TEST(HostTreeEnsemble, AggregatesAndPostTransforms) {
    // Row [-1, 1, 2]: stump0 -1 < 0 -> 1.5 (t0); stump1 1 > 0.5 -> 0.25 (t0); stump2 2 != 2 false
    // -> 0.5 (t1). Row [1, 0, 7]: stump0 -> -2 (t1); stump1 -> 3 (t1); stump2 -> -1 (t0).
    Tensor x = make_tensor(DType::kFloat32, {2, 3}, {-1, 1, 2, 1, 0, 7});
    const std::vector<double> sum{1.75, 0.5, -1, 1};
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(1, 0))[0]), sum, 1e-6);
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(0, 0))[0]),
                    {1.75 / 3, 0.5 / 3, -1.0 / 3, 1.0 / 3}, 1e-6);
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(2, 0))[0]), {0.25, 0.5, -1, -2},
                    1e-6);
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(3, 0))[0]), {1.5, 0.5, -1, 3},
                    1e-6);
    // Post transforms on the SUM scores, by their formulas.
    std::vector<double> logistic, softmax;
    for (double v : sum) logistic.push_back(1 / (1 + std::exp(-v)));
    for (int r = 0; r < 2; ++r) {
        double a = std::exp(sum[2 * r]), b = std::exp(sum[2 * r + 1]);
        softmax.insert(softmax.end(), {a / (a + b), b / (a + b)});
    }
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(1, 2))[0]), logistic, 1e-6);
    expect_near_all(doubles_of(run_host("TreeEnsemble", {x}, stumps(1, 1))[0]), softmax, 1e-6);
    // PROBIT of the average (values in (0, 1) after LOGISTIC are not reachable here; use AVERAGE
    // of weights in (0, 1)): probit(p) = sqrt(2) * erfinv(2p - 1); check erf(probit / sqrt2) = 2p
    // - 1.
    Tensor x1 = make_tensor(DType::kFloat64, {1, 3}, {-1, 1, 2});
    ir::AttrMap p = stumps(1, 4);
    p["leaf_weights"] = f32s({0.125, 0, 0.25, 0, 0, 0.5});
    auto pr = doubles_of(run_host("TreeEnsemble", {x1}, p)[0]);  // sums: t0 0.375, t1 0.5
    EXPECT_NEAR(std::erf(pr[0] / std::sqrt(2.0)), 2 * 0.375 - 1, 1e-9);
    EXPECT_NEAR(pr[1], 0.0, 1e-9);
}

TEST(HostTreeEnsemble, MalformedEnsembles) {
    Tensor x = make_tensor(DType::kFloat32, {1, 3}, {0, 0, 0});
    auto bad = [&](const char* key, ir::Attr v) {
        ir::AttrMap a = stumps(1, 0);
        a[key] = std::move(v);
        return a;
    };
    auto throws = [&](ir::AttrMap a) {
        expect_error_kind([&] { run_host("TreeEnsemble", {x}, a); }, ErrorKind::kInvalidArgument);
    };
    throws(bad("nodes_featureids", std::vector<int64_t>{0, 1, 3}));         // feature 3 of 3
    throws(bad("nodes_modes", u8s({1, 3, 7})));                             // no mode 7
    throws(bad("nodes_modes", u8s({1, 3, 6})));                             // MEMBER without sets
    throws(bad("nodes_truenodeids", std::vector<int64_t>{0, 2, 6}));        // leaf 6 of 6
    throws(bad("leaf_targetids", std::vector<int64_t>{0, 1, 0, 1, 0, 2}));  // target 2 of 2
    throws(bad("nodes_splits", f32s({0, 1})));                              // length
    throws(bad("tree_roots", std::vector<int64_t>{3}));
    throws(bad("aggregate_function", int64_t{4}));
    throws(bad("post_transform", int64_t{5}));
    // A cycle: node0 (0 <= 0: true) branches to node 0 itself.
    ir::AttrMap cyc = stumps(1, 0);
    cyc["nodes_modes"] = u8s({0, 3, 5});
    cyc["nodes_trueleafs"] = std::vector<int64_t>{0, 1, 1};
    cyc["nodes_truenodeids"] = std::vector<int64_t>{0, 2, 4};
    throws(cyc);
    // X rank 3, and an int X.
    expect_error_kind(
        [&] {
            run_host("TreeEnsemble", {Tensor(DType::kFloat32, {1, 1, 3})}, stumps(1, 0));
        },
        ErrorKind::kInvalidArgument);
    expect_error_kind(
        [&] {
            run_host("TreeEnsemble", {Tensor(DType::kInt64, {1, 3})}, stumps(1, 0));
        },
        ErrorKind::kUnsupported);
}

}  // namespace
}  // namespace kiln::op
