// Output-ready reports (runtime/output_ready.h) from the sequential and dataflow executors, on a
// chain of the runtime's built-in async copies: x -> a -> out0 -> b -> out1, outputs out0,
// out1 and x itself. out0 must be reported once the step that reads it (out0 -> b) is done and
// before out1 is written (out1 is bound to a caller's tensor holding a sentinel, which the report
// of out0 still sees); out1 at its step; x, an input, at the end. Each output exactly once,
// with its final value.
#include <gtest/gtest.h>

#include <mutex>

#include "runtime/async_kernel.h"
#include "runtime/dataflow_executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/sequential_executor.h"

namespace kiln::runtime {
namespace {

std::shared_ptr<Executable> copy_chain() {
    auto exe = std::make_shared<Executable>();
    auto buf = [&](const char* name, BufferRole role) { exe->buffers.push_back({name, DType::kFloat32, {4}, role, {}}); };
    buf("x", BufferRole::kInput);
    buf("a", BufferRole::kIntermediate);
    buf("out0", BufferRole::kOutput);
    buf("b", BufferRole::kIntermediate);
    buf("out1", BufferRole::kOutput);
    KernelDesc copy;
    copy.symbol = kAsyncCopySymbol;
    copy.is_async = true;
    exe->kernels = {copy};
    auto step = [&](int from, int to) {
        StepDesc s;
        s.kernel = 0;
        s.args = {from, to};
        s.num_inputs = 1;
        s.node_name = exe->buffers[to].name;
        exe->steps.push_back(s);
    };
    step(0, 1);
    step(1, 2);
    step(2, 3);  // reads out0: out0 is final only after this step
    step(3, 4);
    exe->inputs = {0};
    exe->outputs = {2, 4, 0};
    exe->planned_for_concurrency = true;  // no shared memory
    return exe;
}

struct Report {
    size_t output;
    float value;       // the reported tensor's element 0
    float out1_then;   // the caller's out1 tensor at the time of the report
};

void check_reports(Executor& e) {
    Tensor x(DType::kFloat32, {4});
    for (int i = 0; i < 4; ++i) x.data_as<float>()[i] = 1.5f + i;
    Tensor out1(DType::kFloat32, {4});
    for (int i = 0; i < 4; ++i) out1.data_as<float>()[i] = -7;  // the sentinel
    std::vector<const Tensor*> into{nullptr, &out1, nullptr};
    std::mutex mu;
    std::vector<Report> reports;
    const OutputReadyFn ready = [&](size_t j, const Tensor& t) {
        std::lock_guard<std::mutex> lock(mu);
        reports.push_back({j, t.data_as<float>()[0], out1.data_as<float>()[0]});
    };
    for (int run = 0; run < 2; ++run) {  // the plan is made once, reused
        reports.clear();
        out1.data_as<float>()[0] = -7;
        std::vector<Tensor> outs;
        ASSERT_TRUE(e.run({x}, outs, nullptr, 0, &into, &ready).ok());
        ASSERT_EQ(reports.size(), 3u) << e.name();
        EXPECT_EQ(reports[0].output, 0u) << e.name();
        EXPECT_EQ(reports[0].value, 1.5f);
        EXPECT_EQ(reports[0].out1_then, -7) << e.name() << ": out0 was reported after out1 was written";
        EXPECT_EQ(reports[1].output, 1u);
        EXPECT_EQ(reports[1].value, 1.5f);
        EXPECT_EQ(reports[2].output, 2u);  // the input, copied at the end
        EXPECT_EQ(reports[2].value, 1.5f);
        ASSERT_EQ(outs.size(), 3u);
        EXPECT_EQ(outs[1].data(), out1.data());  // written in place
        for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[0].data_as<float>()[i], 1.5f + i);
    }
    // No callback: nothing reported, the same outputs.
    std::vector<Tensor> outs;
    ASSERT_TRUE(e.run({x}, outs).ok());
    EXPECT_EQ(outs[1].data_as<float>()[3], 4.5f);
}

TEST(OutputReady, SequentialExecutorReportsEachOutputAfterItsLastStep) {
    auto alloc = std::make_shared<CpuAllocator>();
    SequentialExecutor e(copy_chain(), nullptr, alloc.get());
    check_reports(e);
}

TEST(OutputReady, DataflowExecutorReportsEachOutputAfterItsLastStep) {
    auto alloc = std::make_shared<CpuAllocator>();
    InterOpThreadPool inter(2);
    DataflowExecutor e(copy_chain(), nullptr, &inter, alloc.get());
    check_reports(e);
}

TEST(OutputReady, PlanCountsEveryStepTouchingAnOutput) {
    auto exe = copy_chain();
    exe->outputs = {2, 2, 4};  // out0 twice: the second is a copy made at the end
    OutputReadyPlan p = OutputReadyPlan::build(*exe);
    EXPECT_EQ(p.touches, (std::vector<int>{2, 0, 1}));
    EXPECT_EQ(p.touched_by[1], (std::vector<int>{0}));
    EXPECT_EQ(p.touched_by[2], (std::vector<int>{0}));
    EXPECT_EQ(p.touched_by[3], (std::vector<int>{2}));
    EXPECT_TRUE(p.touched_by[0].empty());
}

}  // namespace
}  // namespace kiln::runtime
