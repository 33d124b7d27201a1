// tune::spend_budget against fake tasks on a fake clock: each round costs a known number of
// seconds, so the split of the budget is checked exactly, without measuring anything.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tune/task_scheduler.h"

namespace kiln::tune {
namespace {

struct FakeTasks : TuningTasks {
    double clock = 0;
    std::vector<double> weights, round_cost;
    std::vector<int> done_after;  // rounds after which a task is done (-1: never)
    std::vector<int> rounds, confirms;
    std::vector<std::string> calls;  // "r<i>:<n>" and "c<i>", in order

    explicit FakeTasks(std::vector<double> w, std::vector<double> cost, std::vector<int> done = {})
        : weights(std::move(w)), round_cost(std::move(cost)), done_after(std::move(done)) {
        done_after.resize(weights.size(), -1);
        rounds.assign(weights.size(), 0);
        confirms.assign(weights.size(), 0);
    }
    size_t size() const override { return weights.size(); }
    void round(size_t i, int n) override {
        clock += round_cost[i];
        ++rounds[i];
        calls.push_back("r" + std::to_string(i) + ":" + std::to_string(n));
    }
    bool done(size_t i) const override { return done_after[i] >= 0 && rounds[i] >= done_after[i]; }
    double weight(size_t i) const override { return weights[i]; }
    void confirm(size_t i) override {
        clock += round_cost[i];
        ++confirms[i];
        calls.push_back("c" + std::to_string(i));
    }
    BudgetOptions options(double budget, int batch) {
        BudgetOptions o;
        o.budget_seconds = budget;
        o.batch = batch;
        o.elapsed = [this] { return clock; };
        return o;
    }
};

TEST(SpendBudget, FirstRoundsThenSharesByWeightHeaviestFirst) {
    // Weights 1:3, rounds of 1 s, a 22 s budget: 2 s of first rounds, then the heavy task gets
    // 3/4 of the 20 s left (15 s: its first round counts, so 15 more rounds -> 16 s, then its
    // confirmation), the light one what is left.
    FakeTasks t({1, 3}, {1, 1});
    std::vector<size_t> order = spend_budget(t, t.options(22, 8));
    EXPECT_EQ(order, (std::vector<size_t>{1, 0}));
    ASSERT_GE(t.calls.size(), 2u);
    EXPECT_EQ(t.calls[0], "r0:4");  // the first round takes at most 4 candidates
    EXPECT_EQ(t.calls[1], "r1:4");
    EXPECT_EQ(t.calls[2], "r1:8");  // then the heaviest first, with the whole batch
    EXPECT_EQ(t.rounds[1], 16);     // 1 + 15 (its share: 20 x 3/4)
    EXPECT_EQ(t.confirms[1], 1);
    EXPECT_EQ(t.rounds[0], 5);      // 1 + the 4 s left after the heavy task's confirmation (22 - 18)
    EXPECT_EQ(t.confirms[0], 0);    // the budget was gone
    EXPECT_DOUBLE_EQ(t.clock, 22);
}

TEST(SpendBudget, ATaskDoneEarlyLeavesItsTimeToTheNext) {
    FakeTasks t({3, 1}, {1, 1}, {2, -1});  // the heavy task is done after 2 rounds
    spend_budget(t, t.options(20, 8));
    EXPECT_EQ(t.rounds[0], 2);
    EXPECT_EQ(t.confirms[0], 1);
    EXPECT_EQ(t.rounds[1], 1 + 16);  // the 16 s left after 4 s (2 first rounds, 1 more, a confirmation)
    EXPECT_DOUBLE_EQ(t.clock, 20);
}

TEST(SpendBudget, TheBudgetEndsTheFirstRoundsAndNoTaskIsConfirmedPastIt) {
    FakeTasks t({1, 1, 1}, {2, 2, 2});
    std::vector<size_t> order = spend_budget(t, t.options(3, 2));
    EXPECT_EQ(t.calls, (std::vector<std::string>{"r0:2", "r1:2"}));  // 4 s > 3: the third keeps its default
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));                  // equal weights keep their order
}

TEST(SpendBudget, WeightlessTasksShareWhatIsLeftEvenly) {
    FakeTasks t({0, 0}, {1, 1});  // every untuned kernel failed: no weights to go by
    spend_budget(t, t.options(12, 8));
    EXPECT_EQ(t.rounds[0], 1 + 5);  // half of the 10 s left
    EXPECT_EQ(t.confirms[0], 1);
    EXPECT_EQ(t.rounds[1], 1 + 4);  // the 4 s left after the first's confirmation
    EXPECT_EQ(t.confirms[1], 0);
}

}  // namespace
}  // namespace kiln::tune
