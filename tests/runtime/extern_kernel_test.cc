// Extern kernels: the parameter parser, a clear error for a kernel this build lacks, and (when
// built with oneDNN) a dnnl_matmul step against a direct triple loop, split across two threads.
#include "runtime/extern_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

TEST(ExternParams, ParsesKeysIntegersAndLists) {
    ExternParams p("a=3;dims=1,2,-4;post=relu,clip:0:6");
    EXPECT_EQ(p.integer("a"), 3);
    EXPECT_EQ(p.ints("dims"), (std::vector<int64_t>{1, 2, -4}));
    EXPECT_EQ(p.list("post"), (std::vector<std::string>{"relu", "clip:0:6"}));
    EXPECT_EQ(p.integer_or("missing", 7), 7);
    EXPECT_FALSE(p.has("missing"));
    EXPECT_EQ(ExternParams::format({{"a", "1"}, {"b", "x,y"}}), "a=1;b=x,y");
}

TEST(ExternParams, BadTextIsAnErrorNamingTheKey) {
    try {
        ExternParams("a=3").integer("b");
        FAIL() << "missing key accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ExternParams("a=3x").integer("a"), Error);
    EXPECT_THROW(ExternParams("novalue"), Error);
    EXPECT_THROW(ExternParams("d=1,z").ints("d"), Error);
}

TEST(ExternKernel, UnknownKernelIsAClearLoadError) {
    Executable exe;
    exe.buffers.push_back({"x", DType::kFloat32, {4}, BufferRole::kInput});
    exe.buffers.push_back({"y", DType::kFloat32, {4}, BufferRole::kOutput});
    KernelDesc k;
    k.description = "Thing";
    k.extern_name = "no_such_kernel";
    exe.kernels.push_back(k);
    exe.steps.push_back({0, {0, 1}, "thing_node", 1});
    try {
        exe.load();
        FAIL() << "unknown extern kernel loaded";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
    }
}

/// relu(A @ B + bias) with A [m, k], B [k, n] constant, through dnnl_matmul.
void check_dnnl_matmul(int64_t m, int64_t k, int64_t n, int threads) {
    std::mt19937 rng(static_cast<unsigned>(m * 131 + n));
    std::uniform_real_distribution<float> u(-1, 1);
    Tensor b(DType::kFloat32, {k, n});
    for (int64_t i = 0; i < k * n; ++i) b.data_as<float>()[i] = u(rng);
    Tensor bias(DType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) bias.data_as<float>()[i] = u(rng);
    Executable exe;
    exe.buffers.push_back({"A", DType::kFloat32, {m, k}, BufferRole::kInput});
    BufferDesc bd{"B", DType::kFloat32, {k, n}, BufferRole::kConstant};
    bd.constant = b;
    exe.buffers.push_back(bd);
    BufferDesc biasd{"bias", DType::kFloat32, {n}, BufferRole::kConstant};
    biasd.constant = bias;
    exe.buffers.push_back(biasd);
    exe.buffers.push_back({"Y", DType::kFloat32, {m, n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "MatMul+Add+Relu";
    kd.extern_name = "dnnl_matmul";
    kd.extern_params = ExternParams::format({{"a", "0"}, {"bm", "1"}, {"bias", "2"}, {"out", "3"}, {"batch", "1"},
                                            {"m", std::to_string(m)}, {"k", std::to_string(k)}, {"n", std::to_string(n)},
                                            {"a_strides", std::to_string(m * k) + "," + std::to_string(k) + ",1"},
                                            {"b_strides", "0," + std::to_string(n) + ",1"}, {"post", "relu"}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3}, "mm", 3});
    exe.load();
    std::vector<float> a(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n), -7.f);
    for (float& v : a) v = u(rng);
    void* args[4] = {a.data(), b.data(), bias.data(), y.data()};
    ThreadPool pool(threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    // Tolerance: oneDNN accumulates in float with FMA in its own order; k <= 64 terms of |x| < 1.
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = bias.data_as<float>()[j];
            for (int64_t t = 0; t < k; ++t) acc += static_cast<double>(a[i * k + t]) * b.data_as<float>()[t * n + j];
            EXPECT_NEAR(y[i * n + j], std::max(acc, 0.0), 1e-5 + 1e-5 * std::fabs(acc)) << i << "," << j;
        }
}

TEST(ExternKernel, DnnlMatmulMatchesTripleLoop) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    check_dnnl_matmul(5, 24, 40, 1);
    check_dnnl_matmul(48, 64, 33, 2);  // rows split across two threads
    check_dnnl_matmul(1, 32, 200, 2);  // one row: columns split
}

}  // namespace
}  // namespace kiln::runtime
