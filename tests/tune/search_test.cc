// The searcher: on a synthetic workload with a known optimum, against random search; and its
// bookkeeping (no repeats, exhaustive small spaces, failures, determinism, convergence).
#include "tune/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <string>

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

TEST(Searcher, DefaultFirstThenNeverRepeats) {
    // 6 x 6 x 6 = 216 points, proposed 7 at a time (past the model's warm-up) until none are left:
    // every point exactly once, then nothing.
    const std::vector<te::Knob> space = {
        {"x", {1, 2, 3, 4, 5, 6}, 3}, {"y", {1, 2, 4, 8, 16, 32}, 8}, {"z", {0, 1, 2, 3, 4, 5}, 0}};
    Searcher s(space, 42);
    EXPECT_EQ(s.space_size(), 216u);
    auto first = s.propose(7);
    ASSERT_EQ(first.size(), 7u);
    EXPECT_EQ(first[0], (te::KnobValues{{"x", 3}, {"y", 8}, {"z", 0}}));
    std::set<te::KnobValues> seen;
    auto measure = [](const te::KnobValues& v) {
        const double x = v.at("x"), y = std::log2(v.at("y")), z = v.at("z");
        return v.at("z") == 5 ? kInf : 1e-3 * (1 + (x - 4) * (x - 4) + (y - 2) * (y - 2) + 0.3 * x * z);
    };
    for (auto batch = first; !batch.empty(); batch = s.propose(7)) {
        EXPECT_LE(batch.size(), 7u);
        for (const auto& v : batch) {
            EXPECT_EQ(v.size(), 3u);
            EXPECT_TRUE(seen.insert(v).second) << te::ScheduleConfig::format(v) << " proposed twice";
            s.record(v, measure(v));
        }
    }
    EXPECT_EQ(seen.size(), 216u);
    EXPECT_TRUE(s.exhausted());
    EXPECT_EQ(s.trials(), 216);
    EXPECT_TRUE(s.propose(5).empty());
    ASSERT_TRUE(s.best());
    EXPECT_EQ(s.best()->first, (te::KnobValues{{"x", 4}, {"y", 4}, {"z", 0}}));
}

TEST(Searcher, RecordedPointsAreNotProposed) {
    const std::vector<te::Knob> space = {{"x", {1, 2, 3}, 1}, {"y", {1, 2, 3}, 1}};
    Searcher s(space, 1);
    s.record({{"x", 1}, {"y", 1}}, 1.0);
    s.record({{"x", 2}}, 2.0);  // y missing: its default, 1
    auto batch = s.propose(9);
    EXPECT_EQ(batch.size(), 7u);
    for (const auto& v : batch) {
        EXPECT_NE(v, (te::KnobValues{{"x", 1}, {"y", 1}}));
        EXPECT_NE(v, (te::KnobValues{{"x", 2}, {"y", 1}}));
    }
}

TEST(Searcher, TinySpaceIsEnumerated) {
    // 2 x 3 = 6 points, the default (4, 20) not the lexicographically first; one propose(10)
    // returns all six, the default first, and then the space is exhausted.
    const std::vector<te::Knob> space = {{"a", {2, 4}, 4}, {"b", {10, 20, 30}, 20}};
    Searcher s(space, 3);
    EXPECT_EQ(s.space_size(), 6u);
    EXPECT_FALSE(s.exhausted());
    auto all = s.propose(10);
    ASSERT_EQ(all.size(), 6u);
    EXPECT_EQ(all[0], (te::KnobValues{{"a", 4}, {"b", 20}}));
    std::set<te::KnobValues> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), 6u);
    for (int64_t a : {2, 4})
        for (int64_t b : {10, 20, 30}) EXPECT_TRUE(distinct.count({{"a", a}, {"b", b}}));
    EXPECT_TRUE(s.exhausted());
    EXPECT_TRUE(s.propose(1).empty());

    // A space of one knob-less point, and a default missing from the choices (added to them).
    Searcher empty({}, 1);
    EXPECT_EQ(empty.space_size(), 1u);
    EXPECT_EQ(empty.propose(4), (std::vector<te::KnobValues>{{}}));
    Searcher added({{"a", {1, 2}, 3}}, 1);
    EXPECT_EQ(added.space_size(), 3u);
    EXPECT_EQ(added.propose(3)[0], (te::KnobValues{{"a", 3}}));
}

TEST(Searcher, SpaceSizeSaturates) {
    std::vector<te::Knob> space;
    for (int i = 0; i < 20; ++i)
        space.push_back({"k" + std::to_string(i), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 1});
    Searcher s(space, 1);  // 16^20 = 2^80 points
    EXPECT_EQ(s.space_size(), std::numeric_limits<size_t>::max());
    EXPECT_FALSE(s.exhausted());
    for (int round = 0; round < 3; ++round)
        for (const auto& v : s.propose(8)) s.record(v, 1e-3 * (1 + v.at("k0")));
    EXPECT_EQ(s.trials(), 24);
    EXPECT_EQ(s.propose(8).size(), 8u);  // the model path on a huge space
}

TEST(Searcher, FailuresNeverBecomeBest) {
    const std::vector<te::Knob> space = {{"a", {1, 2, 4, 8}, 1}, {"b", {1, 2, 4, 8}, 1}};
    Searcher s(space, 9);
    EXPECT_FALSE(s.best());
    s.record({{"a", 1}, {"b", 1}}, kInf);
    s.record({{"a", 2}, {"b", 1}}, std::nan(""));
    s.record({{"a", 4}, {"b", 1}}, -1.0);
    EXPECT_FALSE(s.best());
    s.record({{"a", 8}, {"b", 1}}, 5e-3);
    ASSERT_TRUE(s.best());
    EXPECT_EQ(s.best()->second, 5e-3);

    // A run where the would-be fastest region fails (a*b >= 16): the best is always a success.
    Searcher t(space, 10);
    auto time = [](const te::KnobValues& v) {
        const int64_t tile = v.at("a") * v.at("b");
        return tile >= 16 ? kInf : 1.0 / static_cast<double>(tile);
    };
    while (!t.exhausted()) {
        for (const auto& v : t.propose(3)) t.record(v, time(v));
        if (t.best()) {
            EXPECT_LT(t.best()->second, kInf);
        }
    }
    ASSERT_TRUE(t.best());
    EXPECT_EQ(t.best()->first.at("a") * t.best()->first.at("b"), 8);
    EXPECT_EQ(t.best()->second, 1.0 / 8);
}

TEST(Searcher, DeterministicForASeed) {
    auto run = [](uint64_t seed) {
        Searcher s(synthetic_space(), seed);
        Bench bench(7);
        std::vector<te::KnobValues> proposed;
        while (s.trials() < 40) {
            for (const auto& v : s.propose(8)) {
                proposed.push_back(v);
                s.record(v, bench(v));
            }
        }
        return proposed;
    };
    const auto a = run(5), b = run(5), c = run(6);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}

TEST(Searcher, Converged) {
    Searcher s({{"a", {1, 2, 3, 4, 5, 6, 7, 8}, 1}}, 1);
    EXPECT_FALSE(s.converged(3));  // nothing recorded
    s.record({{"a", 1}}, kInf);
    s.record({{"a", 2}}, kInf);
    s.record({{"a", 3}}, kInf);
    EXPECT_TRUE(s.converged(3));   // only failures: nothing to improve on
    EXPECT_FALSE(s.converged(4));  // fewer than 4 measurements
    s.record({{"a", 4}}, 10.0);
    EXPECT_FALSE(s.converged(3));  // the first success is an improvement
    s.record({{"a", 5}}, 9.95);    // 0.5%: not an improvement
    s.record({{"a", 6}}, 11.0);
    s.record({{"a", 7}}, kInf);
    EXPECT_TRUE(s.converged(3));
    EXPECT_FALSE(s.converged(4));  // the window holds the first success
    s.record({{"a", 8}}, 9.0);     // 9.5% better
    EXPECT_FALSE(s.converged(1));
    EXPECT_FALSE(s.converged(4));
    EXPECT_EQ(s.best()->second, 9.0);
}
