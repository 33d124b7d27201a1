// Profiler: trace events and the summary from hand-filled step timings (no kernels needed).
#include "runtime/profiler.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace kiln::runtime {
namespace {

std::shared_ptr<Executable> two_step_exe() {
    auto exe = std::make_shared<Executable>();
    exe->kernels = {{"lib.so", "k0", "Conv+Relu"}, {"lib.so", "k1", "Add"}};
    exe->buffers = {{"x", DType::kFloat32, {1, 8}, BufferRole::kInput, {}},
                    {"y", DType::kFloat32, {1, 8}, BufferRole::kIntermediate, {}},
                    {"z", DType::kFloat32, {1, 8}, BufferRole::kOutput, {}}};
    StepDesc a{0, {0, 1}, "conv \"1\""};
    a.num_inputs = 1;
    a.flops = 2e6;
    StepDesc b{1, {1, 1, 2}, "add1"};
    b.num_inputs = 2;
    b.flops = 8;
    exe->steps = {a, b};
    return exe;
}

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

TEST(Profiler, TraceHasOneCompleteEventPerStepAndRun) {
    Profiler p;
    auto exe = two_step_exe();
    for (int r = 0; r < 3; ++r) {
        ProfiledRun* run = p.begin_run(exe);
        run->steps[0] = {0, 1000 + r * 10000, 4000};  // 4 µs
        run->steps[1] = {1, 6000 + r * 10000, 1000};
    }
    std::string j = p.chrome_trace_json();
    EXPECT_EQ(count(j, "\"ph\":\"X\""), 6u);
    EXPECT_EQ(count(j, "\"name\":\"Conv+Relu\""), 3u);
    EXPECT_NE(j.find("\"ts\":1.000,\"dur\":4.000"), std::string::npos) << j;
    EXPECT_NE(j.find("\"shapes\":\"f32[1,8] -> f32[1,8]\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"bytes\":64"), std::string::npos) << j;
    EXPECT_NE(j.find("\"node\":\"conv \\\"1\\\"\""), std::string::npos) << "quotes escaped: " << j;
    EXPECT_EQ(count(j, "\"ph\":\"M\""), 2u);  // two thread names
    EXPECT_EQ(p.num_runs(), 3u);
}

TEST(Profiler, SummaryRanksByTotalTimeWithShareAndGflops) {
    Profiler p;
    auto exe = two_step_exe();
    ProfiledRun* run = p.begin_run(exe);
    run->steps[0] = {0, 0, 3000};  // 2e6 flops in 3 µs: 666.67 GFLOP/s, 75 %
    run->steps[1] = {0, 3000, 1000};
    std::string s = p.summary(10);
    size_t conv = s.find("Conv+Relu"), add = s.find("Add");
    ASSERT_NE(conv, std::string::npos) << s;
    ASSERT_NE(add, std::string::npos) << s;
    EXPECT_LT(conv, add) << s;
    EXPECT_NE(s.find("75.0%"), std::string::npos) << s;
    EXPECT_NE(s.find("666.67"), std::string::npos) << s;
    EXPECT_EQ(p.summary(1).find("Add"), std::string::npos);
}

TEST(Profiler, SummaryNamesExternKernelsAndLeavesTheWarmupRunOut) {
    Profiler p;
    auto exe = two_step_exe();
    exe->kernels[0].extern_name = "dnnl_conv";
    for (int r = 0; r < 3; ++r) {
        ProfiledRun* run = p.begin_run(exe);
        run->steps[0] = {0, 0, r == 0 ? 900000 : 3000};  // the warm-up makes its primitives
        run->steps[1] = {0, 3000, 1000};
    }
    std::string s = p.summary(10);
    EXPECT_NE(s.find("Conv+Relu [dnnl_conv]"), std::string::npos) << s;
    EXPECT_NE(s.find("666.67"), std::string::npos) << "mean without the warm-up: " << s;
    EXPECT_NE(s.find("2 runs (the warm-up run left out)"), std::string::npos) << s;
}

TEST(Profiler, UnrunStepsAreLeftOutAndWriteFailsCleanly) {
    Profiler p;
    ProfiledRun* run = p.begin_run(two_step_exe());
    run->steps[0] = {0, 0, 10};
    EXPECT_EQ(count(p.chrome_trace_json(), "\"ph\":\"X\""), 1u);
    Status st = p.write_chrome_trace("/nonexistent_dir/trace.json");
    EXPECT_EQ(st.kind(), ErrorKind::kIOError);
}

}  // namespace
}  // namespace kiln::runtime
