// The searcher: on a synthetic workload with a known optimum, against random search; and its
// bookkeeping (no repeats, exhaustive small spaces, failures, determinism, convergence).
#include "tune/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

using namespace kiln;
using namespace kiln::tune;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A conv-like space: register tile a x b, a cache block c, an unroll d. 6 x 8 x 7 x 7 = 2352 points.
std::vector<te::Knob> synthetic_space() {
    return {{"k.a", {1, 2, 4, 8, 16, 32}, 1},
            {"k.b", {1, 2, 3, 4, 6, 8, 12, 16}, 1},
            {"k.c", {1, 2, 4, 8, 16, 32, 64}, 8},
            {"k.d", {0, 1, 2, 3, 4, 5, 6}, 0}};
}

/// The noise-free time: a bowl in log space whose minimum is a register tile a*b of about 24
/// (an interaction: a and b trade against each other), c = 16 and d near 4, with a c-d
/// interaction; tiles of 256 and more fail (a compile error or a register spill that crashed).
double true_time(const te::KnobValues& v) {
    const double la = std::log2(v.at("k.a")), lb = std::log2(v.at("k.b")), lc = std::log2(v.at("k.c"));
    const double d = static_cast<double>(v.at("k.d"));
    if (v.at("k.a") * v.at("k.b") >= 256) return kInf;
    const double e = 0.25 * (la + lb - 4.6) * (la + lb - 4.6) + 0.06 * (la - lb) * (la - lb) +
                     0.12 * (lc - 4) * (lc - 4) + 0.05 * (d - 4) * (d - 4) + 0.04 * (lc - 4) * (d - 4);
    return 1e-3 * std::exp(0.35 * e);
}

double optimum() {
    double best = kInf;
    const auto space = synthetic_space();
    for (int64_t a : space[0].choices)
        for (int64_t b : space[1].choices)
            for (int64_t c : space[2].choices)
                for (int64_t d : space[3].choices)
                    best = std::min(best, true_time({{"k.a", a}, {"k.b", b}, {"k.c", c}, {"k.d", d}}));
    return best;
}

int within(double factor) {
    const double opt = optimum();
    const auto space = synthetic_space();
    int n = 0;
    for (int64_t a : space[0].choices)
        for (int64_t b : space[1].choices)
            for (int64_t c : space[2].choices)
                for (int64_t d : space[3].choices)
                    n += true_time({{"k.a", a}, {"k.b", b}, {"k.c", c}, {"k.d", d}}) <= factor * opt;
    return n;
}

/// A measurement: the true time with 2% log-normal noise.
struct Bench {
    explicit Bench(uint64_t seed) : rng(seed) {}
    double operator()(const te::KnobValues& v) { return true_time(v) * std::exp(0.02 * noise(rng)); }
    std::mt19937_64 rng;
    std::normal_distribution<double> noise;
};

/// Tunes with the searcher in batches of 8 until `budget` trials; the true time of its best point.
double run_searcher(uint64_t seed, int budget) {
    Searcher s(synthetic_space(), seed);
    Bench bench(seed + 1000);
    while (s.trials() < budget) {
        auto batch = s.propose(std::min(8, budget - s.trials()));
        for (const auto& v : batch) s.record(v, bench(v));
    }
    return true_time(s.best()->first);
}

/// Random search: `budget` distinct uniform points, the true time of the best measured one.
double random_search(uint64_t seed, int budget) {
    const auto space = synthetic_space();
    std::mt19937_64 rng(seed);
    Bench bench(seed + 1000);
    std::set<te::KnobValues> seen;
    double best_measured = kInf, best_true = kInf;
    while (static_cast<int>(seen.size()) < budget) {
        te::KnobValues v;
        for (const auto& k : space) v[k.name] = k.choices[rng() % k.choices.size()];
        if (!seen.insert(v).second) continue;
        const double t = bench(v);
        if (t < best_measured) best_measured = t, best_true = true_time(v);
    }
    return best_true;
}

}  // namespace

TEST(Searcher, FindsTheOptimumFasterThanRandomSearch) {
    // Within 5% of the optimum in 48 trials in at least 9 of 10 seeds; random search with the
    // same 48 trials and noise hits it far less often (17 of the 2352 points are that close, so
    // about 30% of random runs do). Over seeds 1..100 the searcher hits in ~95 (measured when
    // kLocal was chosen), so 9 of 10 is not a knife edge.
    const double opt = optimum();
    const int near = within(1.05);
    int hits = 0, random_hits = 0;
    double ratio = 0, random_ratio = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        const double t = run_searcher(seed, 48), r = random_search(seed, 48);
        hits += t <= 1.05 * opt;
        random_hits += r <= 1.05 * opt;
        ratio += t / opt / 10;
        random_ratio += r / opt / 10;
    }
    std::printf("points within 5%%: %d of 2352; searcher %d/10 hits, mean %.4f x optimum; random %d/10, %.4f x\n",
                near, hits, ratio, random_hits, random_ratio);
    EXPECT_GE(hits, 9);
    EXPECT_LT(ratio, random_ratio);
    EXPECT_GT(hits, random_hits);
}
