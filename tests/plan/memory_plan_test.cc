// Planner, checker and figures on hand-made problems whose answers are worked out by hand here.
#include "plan/memory_plan.h"

#include <gtest/gtest.h>

#include "plan/plan_checker.h"
#include "plan/plan_report.h"
#include "plan/step_dag.h"
#include "support/error.h"

namespace kiln::plan {
namespace {

PlanTensor tensor(std::string name, size_t bytes, int producer, std::vector<int> readers, bool pinned = false,
                  std::vector<int> inplace = {}) {
    PlanTensor t;
    t.name = std::move(name);
    t.bytes = bytes;
    t.producer = producer;
    t.readers = std::move(readers);
    t.pinned = pinned;
    t.inplace_candidates = std::move(inplace);
    return t;
}

// A chain x -> s0 -> a -> s1 -> b -> s2 -> c -> s3 -> y (y pinned), no in-place candidates.
PlanProblem chain(bool inplace) {
    PlanProblem p;
    p.num_steps = 4;
    p.tensors.push_back(tensor("x", 1000, -1, {0}, true));
    p.tensors.push_back(tensor("a", 1000, 0, {1}));
    p.tensors.push_back(tensor("b", 1000, 1, {2}, false, inplace ? std::vector<int>{1} : std::vector<int>{}));
    p.tensors.push_back(tensor("c", 1000, 2, {3}, false, inplace ? std::vector<int>{2} : std::vector<int>{}));
    p.tensors.push_back(tensor("y", 1000, 3, {}, true));
    return p;
}

TEST(MemoryPlan, ChainPingPongsBetweenTwoBuffers) {
    PlanProblem p = chain(false);
    MemoryPlan plan = plan_memory(p);
    EXPECT_TRUE(check_plan(p, plan).empty());
    EXPECT_EQ(plan.arena_bytes, 2 * align_up(1000));  // a and c share, b in between
    EXPECT_EQ(plan.offsets[1], plan.offsets[3]);
    EXPECT_NE(plan.offsets[1], plan.offsets[2]);
    EXPECT_EQ(plan.offsets[0], -1);
    EXPECT_EQ(plan.offsets[4], -1);
    EXPECT_EQ(plan.inplace_count, 0);
    EXPECT_EQ(naive_sum_bytes(p), 3000u);
    EXPECT_EQ(lower_bound_bytes(p, plan), 2000u);
}

TEST(MemoryPlan, InPlaceChainUsesOneBuffer) {
    PlanProblem p = chain(true);
    MemoryPlan plan = plan_memory(p);
    EXPECT_TRUE(check_plan(p, plan).empty());
    EXPECT_EQ(plan.inplace_count, 2);
    EXPECT_EQ(plan.inplace_source[2], 1);
    EXPECT_EQ(plan.inplace_source[3], 2);
    EXPECT_EQ(plan.arena_bytes, align_up(1000));
    EXPECT_EQ(lower_bound_bytes(p, plan), 1000u);
}

TEST(MemoryPlan, NoInPlaceWhenTheSourceIsReadLater) {
    // a is read by step 1 (b in place candidate) and again by step 2: it does not die at step 1.
    PlanProblem p;
    p.num_steps = 3;
    p.tensors.push_back(tensor("a", 256, 0, {1, 2}));
    p.tensors.push_back(tensor("b", 256, 1, {2}, false, {0}));
    p.tensors.push_back(tensor("y", 256, 2, {}, true));
    MemoryPlan plan = plan_memory(p);
    EXPECT_EQ(plan.inplace_count, 0);
    EXPECT_NE(plan.offsets[0], plan.offsets[1]);
    EXPECT_TRUE(check_plan(p, plan).empty());
}

TEST(MemoryPlan, SmallerSourceIsNotTaken) {
    PlanProblem p;
    p.num_steps = 2;
    p.tensors.push_back(tensor("a", 100, 0, {1}));
    p.tensors.push_back(tensor("b", 200, 1, {}, false, {0}));
    MemoryPlan plan = plan_memory(p);
    EXPECT_EQ(plan.inplace_count, 0);
    EXPECT_TRUE(check_plan(p, plan).empty());
}

TEST(MemoryPlan, BestFitReusesTheSmallestHole) {
    // Steps: 0 makes big (4096) and small (1024); both die at 1; 2 makes m (1024) while a
    // long-lived keeper (2048, made at 0) is live. m fits in either hole; the arena stays the same.
    PlanProblem p;
    p.num_steps = 4;
    p.tensors.push_back(tensor("big", 4096, 0, {1}));
    p.tensors.push_back(tensor("small", 1024, 0, {1}));
    p.tensors.push_back(tensor("keeper", 2048, 0, {3}));
    p.tensors.push_back(tensor("m", 1024, 2, {3}));
    MemoryPlan plan = plan_memory(p);
    EXPECT_TRUE(check_plan(p, plan).empty());
    EXPECT_EQ(plan.arena_bytes, 4096u + 1024u + 2048u);
    EXPECT_EQ(lower_bound_bytes(p, plan), 4096u + 1024u + 2048u);
}

TEST(MemoryPlan, OffsetsAreAligned) {
    PlanProblem p;
    p.num_steps = 3;
    p.tensors.push_back(tensor("a", 3, 0, {2}));
    p.tensors.push_back(tensor("b", 5, 1, {2}));
    p.tensors.push_back(tensor("c", 7, 2, {}));
    MemoryPlan plan = plan_memory(p);
    for (int64_t o : plan.offsets) EXPECT_EQ(o % 64, 0);
    EXPECT_EQ(plan.arena_bytes, 192u);  // all three live at step 2
    EXPECT_TRUE(check_plan(p, plan).empty());
}

TEST(MemoryPlan, ConcurrentModeKeepsParallelBranchesApart) {
    // Two independent branches: 0 -> a -> 1 and 2 -> b -> 3, joined by nothing. Sequentially a
    // and b never overlap (a dies at 1, b is born at 2); concurrently steps 0..3 may interleave.
    PlanProblem p;
    p.num_steps = 4;
    p.tensors.push_back(tensor("x", 64, -1, {0, 2}, true));
    p.tensors.push_back(tensor("a", 640, 0, {1}));
    p.tensors.push_back(tensor("b", 640, 2, {3}));
    p.tensors.push_back(tensor("ya", 64, 1, {}, true));
    p.tensors.push_back(tensor("yb", 64, 3, {}, true));
    MemoryPlan seq = plan_memory(p, PlanMode::kSequential);
    MemoryPlan con = plan_memory(p, PlanMode::kConcurrent);
    EXPECT_EQ(seq.arena_bytes, 640u);
    EXPECT_EQ(con.arena_bytes, 1280u);
    EXPECT_TRUE(check_plan(p, seq).empty());
    EXPECT_TRUE(check_plan(p, con).empty());
    // The sequential plan is not valid for concurrent execution: the checker says so.
    MemoryPlan wrong = seq;
    wrong.mode = PlanMode::kConcurrent;
    EXPECT_FALSE(check_plan(p, wrong).empty());
}

TEST(MemoryPlan, ConcurrentModeReusesAlongADependencyChain) {
    // a (step 0) is read by step 1 which produces b read by step 2 producing c: c's producer
    // descends from every use of a, so a and c may share even concurrently.
    PlanProblem p = chain(false);
    MemoryPlan con = plan_memory(p, PlanMode::kConcurrent);
    EXPECT_EQ(con.offsets[1], con.offsets[3]);
    EXPECT_EQ(con.arena_bytes, 2 * align_up(1000));
    EXPECT_TRUE(check_plan(p, con).empty());
}

TEST(StepDag, Ancestors) {
    // 0 -> 1 -> 3, 0 -> 2, 2 and 3 independent of each other except through 0.
    PlanProblem p;
    p.num_steps = 4;
    p.tensors.push_back(tensor("a", 1, 0, {1, 2}));
    p.tensors.push_back(tensor("b", 1, 1, {3}));
    StepDag dag(p);
    EXPECT_TRUE(dag.is_ancestor(0, 1));
    EXPECT_TRUE(dag.is_ancestor(0, 3));
    EXPECT_TRUE(dag.is_ancestor(1, 3));
    EXPECT_FALSE(dag.is_ancestor(2, 3));
    EXPECT_FALSE(dag.is_ancestor(3, 0));
    EXPECT_FALSE(dag.is_ancestor(1, 1));
    EXPECT_EQ(dag.predecessors(3), std::vector<int>{1});
}

TEST(PlanChecker, CatchesOverlapMisalignmentAndBadInPlace) {
    PlanProblem p = chain(false);
    MemoryPlan plan = plan_memory(p);
    MemoryPlan overlap = plan;
    overlap.offsets[2] = overlap.offsets[1];  // a and b are both live at step 1
    EXPECT_FALSE(check_plan(p, overlap).empty());
    MemoryPlan misaligned = plan;
    misaligned.offsets[1] += 8;
    EXPECT_FALSE(check_plan(p, misaligned).empty());
    MemoryPlan pinned = plan;
    pinned.offsets[0] = 0;
    EXPECT_FALSE(check_plan(p, pinned).empty());
    // b "in place of" a without being a candidate.
    MemoryPlan fake = plan;
    fake.inplace_source[2] = 1;
    fake.offsets[2] = fake.offsets[1];
    EXPECT_FALSE(check_plan(p, fake).empty());
    EXPECT_THROW(verify_plan(p, overlap), Error);
}

TEST(MemoryPlan, BadProblemIsAnInternalError) {
    PlanProblem p;
    p.num_steps = 2;
    p.tensors.push_back(tensor("a", 8, 1, {0}));  // read before it is produced
    try {
        plan_memory(p);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInternal);
        EXPECT_NE(e.message().find("'a'"), std::string::npos);
    }
}

TEST(PlanReport, OneFigurePerLine) {
    PlanProblem p = chain(true);
    MemoryPlan plan = plan_memory(p);
    std::string r = plan_report(p, plan);
    EXPECT_NE(r.find("arena: 1024\n"), std::string::npos) << r;
    EXPECT_NE(r.find("naive sum: 3000\n"), std::string::npos) << r;
    EXPECT_NE(r.find("lower bound: 1000\n"), std::string::npos) << r;
    EXPECT_NE(r.find("in-place steps: 2\n"), std::string::npos) << r;
    EXPECT_NE(r.find("  b  1000 bytes  steps 1..2"), std::string::npos) << r;
}

}  // namespace
}  // namespace kiln::plan
