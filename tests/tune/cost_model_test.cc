// The tuner's cost model: gradient-boosted trees against known functions, and knob features.
#include "tune/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "support/error.h"

using namespace kiln;
using namespace kiln::tune;

namespace {

/// A smooth nonlinear target with an interaction: what log-time over tile sizes looks like.
double target(const std::vector<double>& f) { return std::sin(2 * f[0]) + f[1] * f[1] - f[0] * f[2]; }

struct Data {
    std::vector<std::vector<double>> x;
    std::vector<double> y;
};

Data sample(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.5, 1.5);
    Data d;
    for (size_t i = 0; i < n; ++i) {
        d.x.push_back({u(rng), u(rng), u(rng)});
        d.y.push_back(target(d.x.back()));
    }
    return d;
}

double mse(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
    return s / static_cast<double>(a.size());
}

std::vector<double> ranks(const std::vector<double>& v) {  // no ties in continuous data
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
    return r;
}

/// Spearman's rank correlation: the Pearson correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double mean = (static_cast<double>(a.size()) - 1) / 2;
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    return sab / std::sqrt(saa * sbb);
}

std::vector<double> predict_all(const GradientBoostedTrees& m, const Data& d) {
    std::vector<double> p;
    for (const auto& row : d.x) p.push_back(m.predict(row));
    return p;
}

}  // namespace

TEST(GradientBoostedTrees, UntrainedPredictsZero) {
    GradientBoostedTrees m;
    EXPECT_FALSE(m.trained());
    EXPECT_EQ(m.predict({1.0, 2.0}), 0.0);
}

TEST(GradientBoostedTrees, FitsAStepExactly) {
    // y = 1 below 0.5, 3 above: the first tree splits there; each further tree shrinks the
    // remaining residual by (1 - lr), so 60 trees at lr 0.15 leave (0.85)^60 * 1 ~ 6e-5.
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    for (int i = 0; i < 20; ++i) {
        x.push_back({i / 20.0, static_cast<double>(i % 3)});  // feature 1 is noise
        y.push_back(i / 20.0 < 0.5 ? 1.0 : 3.0);
    }
    GradientBoostedTrees m;
    m.fit(x, y);
    ASSERT_TRUE(m.trained());
    EXPECT_NEAR(m.predict({0.1, 2.0}), 1.0, 1e-3);
    EXPECT_NEAR(m.predict({0.45, 0.0}), 1.0, 1e-3);
    EXPECT_NEAR(m.predict({0.55, 1.0}), 3.0, 1e-3);
    EXPECT_NEAR(m.predict({5.0, 1.0}), 3.0, 1e-3);
}

TEST(GradientBoostedTrees, ConstantTargetAndSingleRow) {
    GradientBoostedTrees m;
    m.fit({{1, 2}, {3, 4}, {5, 6}}, {7, 7, 7});
    EXPECT_NEAR(m.predict({0, 0}), 7.0, 1e-12);
    m.fit({{1}}, {-2});
    EXPECT_NEAR(m.predict({9}), -2.0, 1e-12);
}

TEST(GradientBoostedTrees, NonlinearBeatsTheMeanOnHeldOutPoints) {
    // 200 training points of sin(2 x0) + x1^2 - x0 x2 on [-1.5, 1.5]^3, 300 held out. The mean
    // predictor's held-out MSE is the target's variance; the model must cut it to below 25% (an
    // R^2 above 0.75) and rank the held-out points with Spearman correlation above 0.85.
    const Data train = sample(200, 1), test = sample(300, 2);
    GradientBoostedTrees m;
    m.fit(train.x, train.y);
    const double mean = std::accumulate(train.y.begin(), train.y.end(), 0.0) / train.y.size();
    const std::vector<double> p = predict_all(m, test);
    const double model_mse = mse(p, test.y), mean_mse = mse(std::vector<double>(test.y.size(), mean), test.y);
    EXPECT_LT(model_mse, 0.25 * mean_mse) << "model " << model_mse << " vs mean " << mean_mse;
    EXPECT_GT(spearman(p, test.y), 0.85);
}

TEST(GradientBoostedTrees, FewSamplesStillRank) {
    // The tuner's regime: 40 samples. A looser bar: R^2 above 0.5, Spearman above 0.7.
    const Data train = sample(40, 3), test = sample(300, 4);
    GradientBoostedTrees m;
    m.fit(train.x, train.y);
    const double mean = std::accumulate(train.y.begin(), train.y.end(), 0.0) / train.y.size();
    const std::vector<double> p = predict_all(m, test);
    EXPECT_LT(mse(p, test.y), 0.5 * mse(std::vector<double>(test.y.size(), mean), test.y));
    EXPECT_GT(spearman(p, test.y), 0.7);
}

TEST(GradientBoostedTrees, SubsamplingIsSeededAndStillFits) {
    const Data train = sample(200, 5), test = sample(100, 6);
    auto fit = [&](uint64_t seed) {
        GradientBoostedTrees m({.trees = 80, .subsample = 0.6, .seed = seed});
        m.fit(train.x, train.y);
        return predict_all(m, test);
    };
    const std::vector<double> a = fit(7), b = fit(7), c = fit(8);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    const double mean = std::accumulate(train.y.begin(), train.y.end(), 0.0) / train.y.size();
    EXPECT_LT(mse(a, test.y), 0.25 * mse(std::vector<double>(test.y.size(), mean), test.y));
}

TEST(GradientBoostedTrees, RejectsMalformedData) {
    GradientBoostedTrees m;
    EXPECT_THROW(m.fit({}, {}), Error);
    EXPECT_THROW(m.fit({{1}, {2}}, {1}), Error);
    EXPECT_THROW(m.fit({{1, 2}, {3}}, {1, 2}), Error);
    m.fit({{1, 2}, {3, 4}}, {1, 2});
    EXPECT_THROW(m.predict({1}), Error);
}

TEST(KnobFeatures, ValueLogIndexAndPairProducts) {
    const std::vector<te::Knob> space = {
        {"a", {1, 2, 4, 8}, 2}, {"b", {3, 6}, 3}, {"c", {0, 1}, 0}, {"d", {7, 14}, 7}, {"e", {5}, 5}};
    // a=8 (log 3, index 3), b missing -> default 3 (log2 3, index 0), c=1 (index 1), d=99 is no
    // choice -> default 7 (index 0), e=5. Pairs over the first four values 8, 3, 1, 7.
    const std::vector<double> f = knob_features(space, {{"a", 8}, {"c", 1}, {"d", 99}, {"e", 5}});
    const std::vector<double> want = {8, 3, 3, 3, std::log2(3.0), 0, 1, 0, 1, 7, std::log2(7.0), 0, 5,
                                      std::log2(5.0), 0, 8 * 3, 8 * 1, 8 * 7, 3 * 1, 3 * 7, 1 * 7};
    ASSERT_EQ(f.size(), want.size());
    for (size_t i = 0; i < f.size(); ++i) EXPECT_DOUBLE_EQ(f[i], want[i]) << "feature " << i;
    EXPECT_TRUE(knob_features({}, {}).empty());
}
