// SequentialExecutor over a hand-built Executable whose kernels are compiled from C strings
// (lives with the codegen tests because runtime_tests link the runtime only).
#include "runtime/sequential_executor.h"

#include <gtest/gtest.h>

#include "codegen/compile_driver.h"

namespace kiln::runtime {
namespace {

const char* kKernels = R"C(
#include <stdint.h>
#include <stddef.h>
typedef void (*kiln_task_fn)(int64_t begin, int64_t end, void* ctx);
typedef struct kiln_kernel_env {
    void* pool;
    void (*parallel_for)(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
} kiln_kernel_env;

typedef struct { const float* a; const float* b; float* c; } add_ctx;
static void add_task(int64_t begin, int64_t end, void* p) {
    add_ctx* x = (add_ctx*)p;
    for (int64_t i = begin; i < end; ++i) x->c[i] = x->a[i] + x->b[i];
}
int32_t test_add(void* const* args, const kiln_kernel_env* env) {
    add_ctx c = {(const float*)args[0], (const float*)args[1], (float*)args[2]};
    env->parallel_for(env->pool, 24, add_task, &c);
    return 0;
}
int32_t test_relu(void* const* args, const kiln_kernel_env* env) {
    const float* x = (const float*)args[0];
    float* y = (float*)args[1];
    for (int i = 0; i < 24; ++i) y[i] = x[i] > 0 ? x[i] : 0;
    return 0;
}
int32_t test_fail(void* const* args, const kiln_kernel_env* env) { return 7; }
)C";

std::shared_ptr<Executable> make_exe(bool with_failing_step = false) {
    auto exe = std::make_shared<Executable>();
    std::string lib = codegen::compile_c(kKernels).path;
    exe->kernels = {{lib, "test_add", "Add"}, {lib, "test_relu", "Relu"}, {lib, "test_fail", "Fail"}};
    BufferDesc x{"x", DType::kFloat32, {2, 3, 4}, BufferRole::kInput, {}};
    BufferDesc bias{"bias", DType::kFloat32, {2, 3, 4}, BufferRole::kConstant, Tensor(DType::kFloat32, {2, 3, 4})};
    for (int64_t i = 0; i < 24; ++i) bias.constant.set_f64(i, i % 2 ? 1.0 : -30.0);
    BufferDesc t{"add_out", DType::kFloat32, {2, 3, 4}, BufferRole::kIntermediate, {}};
    BufferDesc y{"y", DType::kFloat32, {2, 3, 4}, BufferRole::kOutput, {}};
    exe->buffers = {x, bias, t, y};
    exe->steps = {{0, {0, 1, 2}, "add1"}, {1, {2, 3}, "relu1"}};
    if (with_failing_step) exe->steps.push_back({2, {3}, "broken_node"});
    exe->inputs = {0};
    exe->outputs = {3};
    return exe;
}

TEST(SequentialExecutor, AddThenReluThroughIntermediate) {
    ThreadPool pool(3);
    CpuAllocator alloc;
    SequentialExecutor ex(make_exe(), &pool, &alloc);
    for (int run = 0; run < 3; ++run) {
        Tensor x(DType::kFloat32, {2, 3, 4});
        for (int64_t i = 0; i < 24; ++i) x.set_f64(i, i * 1.5 - 10 + run);
        std::vector<Tensor> outs;
        Status st = ex.run({x}, outs);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_EQ(outs.size(), 1u);
        EXPECT_EQ(outs[0].shape(), (Shape{2, 3, 4}));
        for (int64_t i = 0; i < 24; ++i) {
            double v = (i * 1.5 - 10 + run) + (i % 2 ? 1.0 : -30.0);
            EXPECT_EQ(outs[0].get_f64(i), v > 0 ? v : 0.0) << i;
        }
        // The intermediate is allocated once, through the allocator; the output of this run
        // (held in `outs`) comes from the allocator too, the previous run's was given back.
        EXPECT_EQ(alloc.bytes_in_use(), 24u * 4 + 24u * 4);
    }
}

TEST(SequentialExecutor, OutputsAreFreshPerRun) {
    ThreadPool pool(2);
    CpuAllocator alloc;
    SequentialExecutor ex(make_exe(), &pool, &alloc);
    Tensor x(DType::kFloat32, {2, 3, 4});
    for (int64_t i = 0; i < 24; ++i) x.set_f64(i, 100);
    std::vector<Tensor> first, second;
    ASSERT_TRUE(ex.run({x}, first).ok());
    x.set_f64(1, 200);
    ASSERT_TRUE(ex.run({x}, second).ok());
    EXPECT_NE(first[0].data(), second[0].data());
    EXPECT_EQ(first[0].get_f64(1), 101.0);
    EXPECT_EQ(second[0].get_f64(1), 201.0);
}

TEST(SequentialExecutor, WrongInputShapeNamesExpectedAndGot) {
    ThreadPool pool(1);
    CpuAllocator alloc;
    SequentialExecutor ex(make_exe(), &pool, &alloc);
    std::vector<Tensor> outs;
    Status st = ex.run({Tensor(DType::kFloat32, {2, 3, 5})}, outs);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(st.message(), "input 'x': expected f32[2,3,4], got f32[2,3,5]");
    st = ex.run({Tensor(DType::kInt32, {2, 3, 4})}, outs);
    EXPECT_EQ(st.message(), "input 'x': expected f32[2,3,4], got i32[2,3,4]");
    st = ex.run({}, outs);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(st.message().find("expected 1 inputs, got 0"), std::string::npos) << st.message();
}

TEST(SequentialExecutor, FailingKernelNamesTheNode) {
    ThreadPool pool(1);
    CpuAllocator alloc;
    SequentialExecutor ex(make_exe(true), &pool, &alloc);
    std::vector<Tensor> outs;
    Status st = ex.run({Tensor(DType::kFloat32, {2, 3, 4})}, outs);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kInternal);
    EXPECT_NE(st.message().find("'broken_node'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("code 7"), std::string::npos) << st.message();
}

TEST(SequentialExecutor, AllocatorBudgetErrorBecomesStatus) {
    ThreadPool pool(1);
    CpuAllocator alloc(50);  // the 96-byte intermediate does not fit
    SequentialExecutor ex(make_exe(), &pool, &alloc);
    std::vector<Tensor> outs;
    Status st = ex.run({Tensor(DType::kFloat32, {2, 3, 4})}, outs);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(st.message().find("'add_out'"), std::string::npos) << st.message();
    EXPECT_EQ(alloc.bytes_in_use(), 0u);
}

TEST(SequentialExecutor, MissingLibraryIsIOErrorStatus) {
    auto exe = make_exe();
    exe->kernels[1].library = "/nonexistent/libkiln_missing.so";
    ThreadPool pool(1);
    CpuAllocator alloc;
    SequentialExecutor ex(exe, &pool, &alloc);
    std::vector<Tensor> outs;
    Status st = ex.run({Tensor(DType::kFloat32, {2, 3, 4})}, outs);
    EXPECT_EQ(st.kind(), ErrorKind::kIOError);
    EXPECT_NE(st.message().find("libkiln_missing.so"), std::string::npos) << st.message();
    auto exe2 = make_exe();
    exe2->kernels[0].symbol = "no_such_symbol";
    EXPECT_THROW(exe2->load(), Error);
}

}  // namespace
}  // namespace kiln::runtime
