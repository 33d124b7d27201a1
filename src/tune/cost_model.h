// The tuner's cost model: gradient-boosted regression trees over knob features.
//
// The searcher (tune/search.h) fits the model on the measured points of one workload, features
// from knob_features and targets log(seconds), and ranks unmeasured points by the prediction.
// With 8-50 samples per workload the model must be cheap to refit every round and robust to
// features on wildly different scales (tile sizes of 1..512 next to a 0/1 flag): trees are,
// since a split only compares values of one feature and is invariant to monotone rescaling.
//
// Boosting (Friedman 2001, squared loss): start from the mean of y; each round fits a regression
// tree to the residuals y - F(x) and adds it scaled by the learning rate. A tree is grown
// greedily to max_depth: at each node every feature and every threshold between two adjacent
// distinct values (of the node's rows) is tried, and the split that most reduces the squared
// error is taken, provided both sides keep at least min_leaf rows. A leaf predicts the mean
// residual of its rows. With subsample < 1 each tree sees a random subset of the rows (drawn
// from `seed`, so a fit is deterministic).
#pragma once

#include <cstdint>
#include <vector>

#include "te/schedule_config.h"

namespace kiln::tune {

struct GbtOptions {
    int trees = 60;
    int max_depth = 3;
    double learning_rate = 0.15;
    int min_leaf = 2;
    double subsample = 1.0;  // fraction of rows each tree is fitted on
    uint64_t seed = 1;       // the row subsampling's random stream
};

/// Regression with gradient-boosted trees (see the file comment).
class GradientBoostedTrees {
public:
    explicit GradientBoostedTrees(GbtOptions opts = {}) : opts_(opts) {}

    /// Fits x (rows of equally many features) to y, replacing any previous fit. Throws
    /// kInvalidArgument for no rows, a size mismatch or ragged rows.
    void fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
    /// The prediction for one feature row (as many features as the fit's rows). 0 when untrained.
    double predict(const std::vector<double>& f) const;
    bool trained() const { return trained_; }

private:
    struct Node {
        int feature = -1;  // -1: a leaf
        double threshold = 0;  // rows with x[feature] <= threshold go left
        double value = 0;      // a leaf's prediction
        int left = -1, right = -1;
    };
    using Tree = std::vector<Node>;  // nodes[0] is the root

    int grow(Tree& tree, const std::vector<std::vector<double>>& x, const std::vector<double>& r,
             std::vector<int>& rows, int depth) const;

    GbtOptions opts_;
    bool trained_ = false;
    size_t features_ = 0;
    double base_ = 0;
    std::vector<Tree> trees_;
};

/// The cost model's features of a knob assignment, three per knob of `space` (in order): its value,
/// log2 of the value (0 for values <= 0), and its index among the choices; then the product of
/// the values of every pair among the first kPairedKnobs knobs. Trees split on one feature at a
/// time, so an interaction (a register tile is ob x t: too small wastes registers, too large
/// spills) would take many splits to carve out of the separate values; the product makes it a
/// single split. Templates declare their main loop tiles first, hence "the first few" (which
/// also bounds the feature count). A knob missing from `v`, or set to a value that is not one of
/// its choices, takes its default (as te::ScheduleConfig applies it).
inline constexpr size_t kPairedKnobs = 4;
std::vector<double> knob_features(const std::vector<te::Knob>& space, const te::KnobValues& v);

}  // namespace kiln::tune
