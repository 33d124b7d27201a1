// Searcher: which knob assignments of one workload to measure next.
//
// The tuner alternates propose(n) -> measure -> record(...) until a trial budget is spent, the
// space is exhausted or the best stopped improving (converged). propose works in three regimes:
//   * endgame: when at most n points were never proposed (a small space: all of them), it
//     returns them all, in enumeration order (the default assignment first);
//   * warm-up: with fewer than kModelMinTrials measurements (or none successful) the model has
//     nothing to learn from, so it returns the default assignment (first, always) and uniformly
//     random unproposed points;
//   * model-guided: it fits the cost model (tune/cost_model.h) on (knob_features, log seconds)
//     of every measurement, a failed one counted as twice the worst successful time (failures
//     tend to cluster: huge tiles, too many registers; the model should steer away from them
//     rather than ignore them), then runs simulated annealing on the predicted log-time: chains
//     start from the best measured points and from random ones, a step changes one knob to an
//     adjacent choice (or, less often, a random one), and the temperature falls geometrically
//     from a fraction of the measured log-time spread to almost zero. The n best-scoring
//     unproposed points the chains visited are the proposal, except that a share epsilon of
//     them is replaced by random unproposed points, so a wrong model cannot trap the search,
//     and a share kLocal by unproposed neighbours of the best measured point (one knob one
//     choice away): with 20-40 samples the trees' piecewise-constant prediction is flat around
//     the incumbent, and this local step is what closes the last few percent (on the synthetic
//     bowl of tests/tune/search_test.cc it raised the 5%-of-optimum hit rate in 48 trials from
//     ~86% to ~95% over 100 seeds). The model is fitted with row subsampling, which smooths its
//     predictions (fewer ties between points) and helped on the same benchmark.
// Knob values are held as indices into the sorted choices. Everything random comes from one
// stream seeded by the constructor, so a searcher is deterministic given its seed and records.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "te/schedule_config.h"

namespace kiln::tune {

class Searcher {
public:
    static constexpr int kModelMinTrials = 8;  // measurements before the model is used
    static constexpr double kEpsilon = 0.2;    // share of model proposals replaced by random ones
    static constexpr double kLocal = 0.25;     // share of proposals next to the best points
    static constexpr double kSubsample = 0.7;  // the model's row subsampling (smoother predictions)
    static constexpr int kChains = 8;          // annealing chains per propose
    static constexpr int kSteps = 300;         // steps per chain

    /// `space` as te::ScheduleConfig::space() reports it; each knob's choices are sorted and
    /// deduplicated here, with the default added when missing.
    Searcher(std::vector<te::Knob> space, uint64_t seed);

    /// Up to n distinct assignments (every knob of the space set) never proposed or recorded
    /// before; fewer only when the space has fewer left.
    std::vector<te::KnobValues> propose(int n);
    /// Records a measurement: seconds per call, +infinity (or NaN, or negative) for a failed
    /// candidate. Knobs missing from `v` or set to a non-choice count as their default.
    void record(const te::KnobValues& v, double seconds_or_inf);

    /// The fastest successful measurement so far; nullopt when none succeeded.
    std::optional<std::pair<te::KnobValues, double>> best() const;
    /// The number of assignments (product of the choice counts), SIZE_MAX when that overflows.
    size_t space_size() const { return space_size_; }
    /// Every assignment was proposed or recorded.
    bool exhausted() const { return visited_.size() >= space_size_; }
    /// Measurements recorded.
    int trials() const { return static_cast<int>(records_.size()); }
    /// True when at least `patience` measurements were recorded and the last `patience` of them
    /// did not improve the best time by more than 1% (a first success counts as an improvement;
    /// only failures since the start means converged: nothing to improve on).
    bool converged(int patience) const;
    const std::vector<te::Knob>& space() const { return space_; }

private:
    using Point = std::vector<int>;  // a choice index per knob

    Point to_point(const te::KnobValues& v) const;
    te::KnobValues to_values(const Point& p) const;
    Point default_point() const;
    Point random_point();
    /// Up to `count` random points neither visited nor in `taken`, appended to `out` and `taken`.
    void add_random(size_t count, std::vector<Point>& out, std::set<Point>& taken);
    /// Up to `count` unvisited points one adjacent choice away from the best measured point (then
    /// the second best, ...), appended to `out` and `taken`.
    void add_neighbours(size_t count, std::vector<Point>& out, std::set<Point>& taken);
    /// Model-guided proposals (the file comment), up to `count` points not visited.
    std::vector<Point> anneal(size_t count);

    std::vector<te::Knob> space_;
    size_t space_size_ = 1;
    std::mt19937_64 rng_;
    std::set<Point> visited_;  // proposed or recorded
    std::vector<std::pair<Point, double>> records_;
    std::vector<double> best_after_;  // the best time after each record (+inf before a success)
    int best_ = -1;                   // index into records_
};

}  // namespace kiln::tune
