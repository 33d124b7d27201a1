// runtime/dims_plan.h: binding an executable's symbolic dims from its inputs, and the per-run
// placement of intermediates (no two buffers alive at the same step overlap; sizes follow the
// dims), checked by brute force over the steps.
#include <gtest/gtest.h>

#include <memory>

#include "runtime/dims_plan.h"

namespace kiln::runtime {
namespace {

BufferDesc buffer(const std::string& name, Shape shape, std::vector<int> dim_of, BufferRole role) {
    BufferDesc b;
    b.name = name;
    b.shape = std::move(shape);
    b.dim_of = std::move(dim_of);
    b.role = role;
    return b;
}

/// x[batch, seq, 8] -> t0 -> t1[batch, 32] -> t2 -> y: a chain where t0 and t2 may share memory,
/// and a buffer of a value inside a fused kernel that no step names.
std::unique_ptr<Executable> chain() {
    auto owned = std::make_unique<Executable>();
    Executable& e = *owned;
    e.dims = {"batch", "seq"};
    e.buffers.push_back(buffer("x", {0, 0, 8}, {0, 1, -1}, BufferRole::kInput));
    e.buffers.push_back(buffer("t0", {0, 0, 8}, {0, 1, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("t1", {0, 32}, {0, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("t2", {0, 0, 8}, {0, 1, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("y", {0, 0, 8}, {0, 1, -1}, BufferRole::kOutput));
    e.buffers.push_back(buffer("fused", {0, 0, 8}, {0, 1, -1}, BufferRole::kIntermediate));  // no step
    e.inputs = {0};
    e.outputs = {4};
    e.steps = {{0, {0, 1}}, {0, {1, 2}}, {0, {2, 3}}, {0, {3, 4}}};
    for (StepDesc& s : e.steps) s.num_inputs = static_cast<int>(s.args.size()) - 1;
    return owned;
}

TEST(DimsPlan, BindsDimsFromInputsAndNamesDisagreements) {
    std::unique_ptr<Executable> owned = chain();
    Executable& e = *owned;
    e.buffers.push_back(buffer("mask", {0, 0}, {0, 1}, BufferRole::kInput));
    e.inputs.push_back(6);
    std::vector<int64_t> dims;
    ASSERT_TRUE(bind_run_dims(e, {Tensor(DType::kFloat32, {2, 7, 8}), Tensor(DType::kFloat32, {2, 7})}, dims).ok());
    EXPECT_EQ(dims, (std::vector<int64_t>{2, 7}));
    Status st = bind_run_dims(e, {Tensor(DType::kFloat32, {2, 7, 8}), Tensor(DType::kFloat32, {2, 9})}, dims);
    ASSERT_FALSE(st.ok());
    for (const char* part : {"input 'mask'", "'seq'", "9", "input 'x'", "7"})
        EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
    st = bind_run_dims(e, {Tensor(DType::kFloat32, {2, 7, 5}), Tensor(DType::kFloat32, {2, 7})}, dims);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("expected f32[batch,seq,8]"), std::string::npos) << st.message();
}

TEST(DimsPlan, LiveBuffersNeverOverlapAtAnyDims) {
    const std::unique_ptr<Executable> owned = chain();
    const Executable& e = *owned;
    for (int64_t batch : {0, 1, 3, 8})
        for (int64_t seq : {1, 7, 64, 129}) {
            DimsPlan p;
            ASSERT_TRUE(plan_at_dims(e, {batch, seq}, p).ok());
            EXPECT_EQ(p.bytes[1], static_cast<size_t>(batch * seq * 8 * 4));
            EXPECT_EQ(p.bytes[2], static_cast<size_t>(batch * 32 * 4));
            EXPECT_EQ(p.bytes[5], 0u);  // used by no step: not placed
            for (size_t s = 0; s < e.steps.size(); ++s) {
                // Buffers alive at step s: first use <= s <= last use.
                std::vector<size_t> live;
                for (size_t b = 0; b < e.buffers.size(); ++b) {
                    if (e.buffers[b].role != BufferRole::kIntermediate || p.bytes[b] == 0) continue;
                    int first = -1, last = -1;
                    for (size_t t = 0; t < e.steps.size(); ++t)
                        for (int a : e.steps[t].args)
                            if (static_cast<size_t>(a) == b) first = first < 0 ? int(t) : first, last = int(t);
                    if (first <= int(s) && int(s) <= last) live.push_back(b);
                }
                for (size_t i : live) {
                    ASSERT_GE(p.offset[i], 0);
                    EXPECT_LE(static_cast<size_t>(p.offset[i]) + p.bytes[i], p.arena_bytes);
                    for (size_t j : live)
                        if (i < j)
                            EXPECT_TRUE(size_t(p.offset[i]) + p.bytes[i] <= size_t(p.offset[j]) ||
                                        size_t(p.offset[j]) + p.bytes[j] <= size_t(p.offset[i]))
                                << e.buffers[i].name << " and " << e.buffers[j].name << " overlap at step " << s;
                }
            }
        }
    // t0 (steps 0-1) and t2 (steps 2-3) are never alive together: they share, beside t1.
    DimsPlan p;
    ASSERT_TRUE(plan_at_dims(e, {2, 7}, p).ok());
    EXPECT_EQ(p.offset[1], p.offset[3]);
    EXPECT_EQ(p.arena_bytes, size_t{448 + 256});
}

TEST(DimsPlan, InPlacePairsShareWhereTheInputDiesOnly) {
    // t0 -> (a residual-style step) t3 = f(t0, t1) in place of t0; t1 lives on past it, so an
    // in-place pair on t1 is ignored.
    auto owned = std::make_unique<Executable>();
    Executable& e = *owned;
    e.dims = {"batch"};
    e.buffers.push_back(buffer("x", {0, 16}, {0, -1}, BufferRole::kInput));
    e.buffers.push_back(buffer("t0", {0, 16}, {0, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("t1", {0, 16}, {0, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("t3", {0, 16}, {0, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("y", {0, 16}, {0, -1}, BufferRole::kOutput));
    e.inputs = {0};
    e.outputs = {4};
    e.steps = {{0, {0, 1}}, {0, {0, 2}}, {0, {1, 2, 3}}, {0, {2, 3, 4}}};
    for (StepDesc& s : e.steps) s.num_inputs = static_cast<int>(s.args.size()) - 1;
    e.steps[2].inplace = {{3, 2}, {3, 1}};  // t1 is read again at step 3: only t0 can host t3
    for (int64_t batch : {1, 5}) {
        DimsPlan p;
        ASSERT_TRUE(plan_at_dims(e, {batch}, p).ok());
        EXPECT_EQ(p.offset[3], p.offset[1]) << "t3 on t0, which dies at step 2";
        EXPECT_NE(p.offset[3], p.offset[2]) << "t1 is still read at step 3";
        EXPECT_EQ(p.arena_bytes, static_cast<size_t>(2 * ((batch * 64 + 63) / 64) * 64));
    }
}

TEST(DimsPlan, OverflowingSizeIsAnError) {
    const std::unique_ptr<Executable> owned = chain();
    const Executable& e = *owned;
    DimsPlan p;
    Status st = plan_at_dims(e, {int64_t{1} << 40, int64_t{1} << 30}, p);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("exceed"), std::string::npos) << st.message();
}

TEST(DimsPlan, EvaluatesDimExpressionsFromTheBoundDims) {
    // x[batch, seq, 8] viewed as t[batch*seq, 8] (a Reshape to [-1, 8]): the expression dim is
    // no input's, and is evaluated from batch and seq at each run.
    Executable e;
    e.dims = {"batch", "seq", "batch*seq", "seq+1"};
    e.buffers.push_back(buffer("x", {0, 0, 8}, {0, 1, -1}, BufferRole::kInput));
    e.buffers.push_back(buffer("t", {0, 8}, {2, -1}, BufferRole::kIntermediate));
    e.buffers.push_back(buffer("y", {0}, {3}, BufferRole::kOutput));
    e.inputs = {0};
    e.outputs = {2};
    e.steps = {{0, {0, 1}}, {0, {1, 2}}};
    for (StepDesc& s : e.steps) s.num_inputs = 1;
    std::vector<int64_t> dims;
    ASSERT_TRUE(bind_run_dims(e, {Tensor(DType::kFloat32, {3, 5, 8})}, dims).ok());
    EXPECT_EQ(dims, (std::vector<int64_t>{3, 5, 15, 6}));
    DimsPlan plan;
    ASSERT_TRUE(plan_at_dims(e, dims, plan).ok());
    EXPECT_EQ(plan.bytes[1], 15u * 8u * 4u);
    EXPECT_EQ(e.buffers[2].shape_at(dims), (Shape{6}));
    // A dim expression that can be negative is checked.
    e.dims[3] = "seq-6";
    Status st = bind_run_dims(e, {Tensor(DType::kFloat32, {3, 5, 8})}, dims);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'seq-6' is -1"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kiln::runtime
