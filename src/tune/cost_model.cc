#include "tune/cost_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "support/error.h"

namespace kiln::tune {

namespace {

/// The squared error a set of rows loses when it predicts its mean: sum^2 / n (up to a constant).
double score(double sum, size_t n) { return n == 0 ? 0 : sum * sum / static_cast<double>(n); }

}  // namespace

void GradientBoostedTrees::fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
    KILN_CHECK(!x.empty(), kInvalidArgument) << "GradientBoostedTrees::fit: no rows";
    KILN_CHECK(x.size() == y.size(), kInvalidArgument)
        << "GradientBoostedTrees::fit: " << x.size() << " rows but " << y.size() << " targets";
    for (const auto& row : x)
        KILN_CHECK(row.size() == x[0].size(), kInvalidArgument)
            << "GradientBoostedTrees::fit: rows of " << x[0].size() << " and " << row.size() << " features";
    const size_t n = x.size();
    features_ = x[0].size();
    base_ = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
    trees_.clear();
    std::vector<double> residual(n);
    for (size_t i = 0; i < n; ++i) residual[i] = y[i] - base_;

    std::mt19937_64 rng(opts_.seed);
    const double fraction = std::clamp(opts_.subsample, 0.0, 1.0);
    const size_t m = std::clamp<size_t>(static_cast<size_t>(std::llround(fraction * n)), 1, n);
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    for (int t = 0; t < opts_.trees; ++t) {
        std::vector<int> rows = all;
        if (m < n) {  // partial Fisher-Yates: the first m rows are a uniform sample
            for (size_t i = 0; i < m; ++i) std::swap(rows[i], rows[i + rng() % (n - i)]);
            rows.resize(m);
        }
        Tree tree;
        grow(tree, x, residual, rows, 0);
        for (size_t i = 0; i < n; ++i) {
            int k = 0;
            while (tree[k].feature >= 0) k = x[i][tree[k].feature] <= tree[k].threshold ? tree[k].left : tree[k].right;
            residual[i] -= opts_.learning_rate * tree[k].value;
        }
        trees_.push_back(std::move(tree));
    }
    trained_ = true;
}

int GradientBoostedTrees::grow(Tree& tree, const std::vector<std::vector<double>>& x, const std::vector<double>& r,
                               std::vector<int>& rows, int depth) const {
    const int index = static_cast<int>(tree.size());
    tree.push_back({});
    double sum = 0;
    for (int i : rows) sum += r[i];
    tree[index].value = sum / static_cast<double>(rows.size());
    const size_t min_leaf = static_cast<size_t>(std::max(1, opts_.min_leaf));
    if (depth >= opts_.max_depth || rows.size() < 2 * min_leaf) return index;

    // Exhaustive search: every feature, every cut between adjacent distinct values.
    const double parent = score(sum, rows.size());
    double best_gain = 1e-12 * (1 + std::abs(parent));  // a split must reduce the error
    int best_feature = -1;
    double best_threshold = 0;
    for (size_t f = 0; f < features_; ++f) {
        std::sort(rows.begin(), rows.end(), [&](int a, int b) { return x[a][f] < x[b][f]; });
        double left = 0;
        for (size_t i = 0; i + 1 < rows.size(); ++i) {
            left += r[rows[i]];
            const size_t nl = i + 1, nr = rows.size() - nl;
            const double lo = x[rows[i]][f], hi = x[rows[i + 1]][f];
            if (nl < min_leaf || nr < min_leaf || !(lo < hi)) continue;
            const double gain = score(left, nl) + score(sum - left, nr) - parent;
            if (gain > best_gain) {
                best_gain = gain;
                best_feature = static_cast<int>(f);
                const double mid = lo + (hi - lo) / 2;
                best_threshold = mid < hi ? mid : lo;  // NOTE: the midpoint of adjacent doubles may round up
            }
        }
    }
    if (best_feature < 0) return index;

    std::vector<int> left_rows, right_rows;
    for (int i : rows) (x[i][best_feature] <= best_threshold ? left_rows : right_rows).push_back(i);
    const int left = grow(tree, x, r, left_rows, depth + 1);
    const int right = grow(tree, x, r, right_rows, depth + 1);
    tree[index].feature = best_feature;
    tree[index].threshold = best_threshold;
    tree[index].left = left;
    tree[index].right = right;
    return index;
}

double GradientBoostedTrees::predict(const std::vector<double>& f) const {
    if (!trained_) return 0;
    KILN_CHECK(f.size() == features_, kInvalidArgument)
        << "GradientBoostedTrees::predict: expected " << features_ << " features, got " << f.size();
    double y = base_;
    for (const Tree& tree : trees_) {
        int k = 0;
        while (tree[k].feature >= 0) k = f[tree[k].feature] <= tree[k].threshold ? tree[k].left : tree[k].right;
        y += opts_.learning_rate * tree[k].value;
    }
    return y;
}

std::vector<double> knob_features(const std::vector<te::Knob>& space, const te::KnobValues& v) {
    std::vector<double> f, values;
    for (const te::Knob& knob : space) {
        int64_t value = knob.default_value;
        auto it = v.find(knob.name);
        if (it != v.end() && std::find(knob.choices.begin(), knob.choices.end(), it->second) != knob.choices.end())
            value = it->second;
        const auto at = std::find(knob.choices.begin(), knob.choices.end(), value);
        const double d = static_cast<double>(value);
        f.push_back(d);
        f.push_back(value > 0 ? std::log2(d) : 0.0);
        f.push_back(static_cast<double>(at - knob.choices.begin()));  // == size() when the default is no choice
        values.push_back(d);
    }
    const size_t paired = std::min(kPairedKnobs, values.size());
    for (size_t i = 0; i < paired; ++i)
        for (size_t j = i + 1; j < paired; ++j) f.push_back(values[i] * values[j]);
    return f;
}

}  // namespace kiln::tune
