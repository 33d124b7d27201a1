// StepGraph: dependencies from buffer reads and writes, against hand-derived edge lists.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/step_graph.h"

namespace kiln::runtime {
namespace {

Executable& with_buffers(Executable& exe, int n) {
    for (int i = 0; i < n; ++i) exe.buffers.push_back({"b" + std::to_string(i), DType::kFloat32, {4}, BufferRole::kIntermediate, {}});
    return exe;
}

StepDesc step(std::vector<int> args, int num_inputs, double flops = 0) {
    StepDesc s;
    s.kernel = 0;
    s.args = std::move(args);
    s.num_inputs = num_inputs;
    s.flops = flops;
    return s;
}

std::vector<int> sorted(std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v;
}

TEST(StepGraph, DiamondFromReadsAndWrites) {
    Executable exe;
    with_buffers(exe, 5);
    // 0: b0 -> b1; 1: b1 -> b2; 2: b1 -> b3; 3: b2, b3 -> b4
    exe.steps = {step({0, 1}, 1, 1e6), step({1, 2}, 1, 1e6), step({1, 3}, 1, 1e6), step({2, 3, 4}, 2, 1e6)};
    StepGraph g = build_step_graph(exe);
    EXPECT_EQ(g.roots, (std::vector<int>{0}));
    EXPECT_EQ(sorted(g.consumers[0]), (std::vector<int>{1, 2}));
    EXPECT_EQ(g.consumers[1], (std::vector<int>{3}));
    EXPECT_EQ(g.consumers[2], (std::vector<int>{3}));
    EXPECT_EQ(g.num_deps, (std::vector<int>{0, 1, 1, 2}));
    EXPECT_EQ(g.level, (std::vector<int>{0, 1, 1, 2}));
    EXPECT_EQ(parallel_width(exe, g, 1e5), 2);
    EXPECT_EQ(parallel_width(exe, g, 1e7), 0);
}

TEST(StepGraph, WriteAfterReadAndUnknownInputsAreOrdered) {
    Executable exe;
    with_buffers(exe, 3);
    // 0 writes b0; 1 reads b0 -> b1; 2 overwrites b0 (must wait for reader 1 and writer 0).
    exe.steps = {step({0}, 0), step({0, 1}, 1), step({2, 0}, 1)};
    StepGraph g = build_step_graph(exe);
    EXPECT_EQ(g.num_deps[2], 2);
    EXPECT_EQ(sorted(g.consumers[0]), (std::vector<int>{1, 2}));
    EXPECT_EQ(g.consumers[1], (std::vector<int>{2}));
    // num_inputs == -1: every arg read and written, so steps sharing a buffer are chained.
    Executable e2;
    with_buffers(e2, 2);
    e2.steps = {step({0, 1}, -1), step({0}, -1), step({1}, -1)};
    StepGraph g2 = build_step_graph(e2);
    EXPECT_EQ(g2.consumers[0], (std::vector<int>{1, 2}));
    EXPECT_EQ(g2.roots, (std::vector<int>{0}));
}

}  // namespace
}  // namespace kiln::runtime
