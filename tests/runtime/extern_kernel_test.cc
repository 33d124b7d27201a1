// Extern kernels: the parameter parser, a clear error for a kernel this build lacks, and (when
// built with oneDNN) a dnnl_matmul step against a direct triple loop, split across two threads, a
// dnnl_conv deconvolution (ConvTranspose) against a direct scatter loop, and dnnl_conv's check of
// its buffers' sizes, and dnnl_matmul's.
#include "runtime/extern_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

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

/// A @ B of two activations through dnnl_matmul (a training step's gradients: no bias, no
/// post-ops, so dnnl_sgemm), A stored [m, k] or transposed [k, m], B [k, n] or [n, k], on
/// `threads` threads, against a double loop.
void check_activation_matmul(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + (ta ? " A^T" : "") +
                 (tb ? " B^T" : "") + " threads " + std::to_string(threads));
    std::mt19937 rng(static_cast<unsigned>(m * 7 + k * 3 + n));
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), y(static_cast<size_t>(m * n), -7.f);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    const std::string as = ta ? "0,1," + std::to_string(m) : "0," + std::to_string(k) + ",1";
    const std::string bs = tb ? "0,1," + std::to_string(k) : "0," + std::to_string(n) + ",1";
    Executable exe;
    exe.buffers.push_back({"A", DType::kFloat32, ta ? Shape{k, m} : Shape{m, k}, BufferRole::kInput});
    exe.buffers.push_back({"B", DType::kFloat32, tb ? Shape{n, k} : Shape{k, n}, BufferRole::kInput});
    exe.buffers.push_back({"Y", DType::kFloat32, {m, n}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "Gemm";
    kd.extern_name = "dnnl_matmul";
    kd.extern_params = ExternParams::format({{"a", "0"}, {"bm", "1"}, {"out", "2"}, {"batch", "1"}, {"m", std::to_string(m)},
                                            {"k", std::to_string(k)}, {"n", std::to_string(n)}, {"a_strides", as},
                                            {"b_strides", bs}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2}, "mm", 2});
    exe.load();
    void* args[3] = {a.data(), b.data(), y.data()};
    ThreadPool pool(threads);
    Status st = exe.run_kernel(0, args, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t t = 0; t < k; ++t)
                acc += static_cast<double>(ta ? a[t * m + i] : a[i * k + t]) * (tb ? b[j * k + t] : b[t * n + j]);
            ASSERT_NEAR(y[i * n + j], acc, 1e-4 + 1e-5 * std::fabs(acc)) << i << "," << j;
        }
}

TEST(ExternKernel, DnnlMatmulOfActivationsMatchesTheLoop) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            check_activation_matmul(37, 50, 70, ta, tb, 2);  // rows split (uneven blocks of 8)
            check_activation_matmul(1, 64, 200, ta, tb, 2);  // one row: columns split
            check_activation_matmul(20, 1, 33, ta, tb, 1);   // depth 1
        }
}

/// Makes `exe` one dnnl_conv step over X (input), W and B (constants) and Y (output) with
/// parameters `params` (x=0;w=1;b=2;y=3 added).
void conv_step(Executable& exe, const Shape& xs, const Tensor& w, const Tensor& b, const Shape& ys, Pairs params) {
    exe.buffers.push_back({"X", DType::kFloat32, xs, BufferRole::kInput});
    BufferDesc wd{"W", DType::kFloat32, w.shape(), BufferRole::kConstant};
    wd.constant = w;
    exe.buffers.push_back(wd);
    BufferDesc bd{"B", DType::kFloat32, b.shape(), BufferRole::kConstant};
    bd.constant = b;
    exe.buffers.push_back(bd);
    exe.buffers.push_back({"Y", DType::kFloat32, ys, BufferRole::kOutput});
    params.insert(params.end(), {{"x", "0"}, {"w", "1"}, {"b", "2"}, {"y", "3"}});
    KernelDesc kd;
    kd.description = "ConvTranspose";
    kd.extern_name = "dnnl_conv";
    kd.extern_params = ExternParams::format(params);
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2, 3}, "up", 3});
}

/// y[m, o] = b[m] + sum x[c, i] w[c, m % mg, k] over o = i s + k d - pb (c in m's group): ONNX's
/// ConvTranspose, 1-D, as a scatter loop.
std::vector<double> deconv_reference(const std::vector<float>& x, const Tensor& w, const Tensor& b, int64_t c,
                                     int64_t l, int64_t m, int64_t g, int64_t k, int64_t s, int64_t d, int64_t pb,
                                     int64_t out) {
    const int64_t cg = c / g, mg = m / g;
    std::vector<double> y(static_cast<size_t>(m * out));
    for (int64_t mo = 0; mo < m; ++mo)
        for (int64_t o = 0; o < out; ++o) y[mo * out + o] = b.data_as<float>()[mo];
    for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t j = 0; j < mg; ++j)
            for (int64_t i = 0; i < l; ++i)
                for (int64_t t = 0; t < k; ++t) {
                    const int64_t o = i * s + t * d - pb, mo = (ci / cg) * mg + j;
                    if (o < 0 || o >= out) continue;
                    y[mo * out + o] += double(x[ci * l + i]) * w.data_as<float>()[(ci * mg + j) * k + t];
                }
    return y;
}

TEST(ExternKernel, DnnlDeconvMatchesScatterLoop) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // 1-D, 2 groups of 16 -> 32 channels, kernel 4, stride 2, dilation 1, pads 1 / 1 (ONNX's end
    // pad 2 less output_padding 1): out = 2 (20 - 1) + 4 - 1 - 1 = 40.
    const int64_t c = 32, l = 20, m = 64, g = 2, k = 4, out = 40;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    Tensor w(DType::kFloat32, {c, m / g, k}), b(DType::kFloat32, {m});
    for (int64_t i = 0; i < c * (m / g) * k; ++i) w.data_as<float>()[i] = u(rng);
    for (int64_t i = 0; i < m; ++i) b.data_as<float>()[i] = u(rng);
    Executable exe;
    conv_step(exe, {1, c, l}, w, b, {1, m, out},
                               {{"kind", "deconv"}, {"wei", "iohw"}, {"src", "1,32,20"}, {"dst", "1,64,40"},
                                {"kernel", "4"}, {"groups", "2"}, {"strides", "2"}, {"dilations", "1"},
                                {"pads_begin", "1"}, {"pads_end", "1"}});
    exe.load();
    std::vector<float> x(static_cast<size_t>(c * l));
    for (float& v : x) v = u(rng);
    const std::vector<double> ref = deconv_reference(x, w, b, c, l, m, g, k, 2, 1, 1, out);
    for (int threads : {1, 2}) {  // two threads: the groups split across them
        std::vector<float> y(static_cast<size_t>(m * out), -7.f);
        void* args[4] = {x.data(), w.data(), b.data(), y.data()};
        ThreadPool pool(threads);
        Status st = exe.run_kernel(0, args, pool.kernel_env());
        ASSERT_TRUE(st.ok()) << st.message();
        // Tolerance: float FMA accumulation of at most 16 x 2 terms of |x| < 1.
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i])) << i;
    }
}

/// y[m, i, j] = b[m] + sum x[c, i + u - 1, j + v - 1] w[m, c, u, v]: a 3x3 conv with pads 1 in
/// float64; `mass` gets each output's sum of |terms| (the scale of its rounding error).
std::vector<double> conv3x3_reference(const std::vector<float>& x, const Tensor& w, const Tensor& b, int64_t c,
                                      int64_t m, int64_t h, std::vector<double>& mass) {
    std::vector<double> y(static_cast<size_t>(m * h * h));
    mass.assign(y.size(), 0.0);
    for (int64_t o = 0; o < m; ++o)
        for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < h; ++j) {
                double acc = b.data_as<float>()[o], abs_sum = std::fabs(acc);
                for (int64_t ci = 0; ci < c; ++ci)
                    for (int64_t u = 0; u < 3; ++u)
                        for (int64_t v = 0; v < 3; ++v) {
                            const int64_t r = i + u - 1, q = j + v - 1;
                            if (r < 0 || q < 0 || r >= h || q >= h) continue;
                            const double t = double(x[(ci * h + r) * h + q]) * w.data_as<float>()[((o * c + ci) * 3 + u) * 3 + v];
                            acc += t;
                            abs_sum += std::fabs(t);
                        }
                y[(o * h + i) * h + j] = acc;
                mass[(o * h + i) * h + j] = abs_sum;
            }
    return y;
}

/// The 3x3 conv C -> M (stride 1, pads 1) at HxH as one dnnl_conv step with `plan_threads` 2,
/// against the float64 sum at 1, 2 and 3 threads, the same bits at each.
void check_winograd_conv(int64_t c, int64_t m, int64_t h) {
    const std::string src = "1," + std::to_string(c) + "," + std::to_string(h) + "," + std::to_string(h);
    const std::string dst = "1," + std::to_string(m) + "," + std::to_string(h) + "," + std::to_string(h);
    const Pairs params = {{"wei", "oihw"},       {"src", src},         {"dst", dst},         {"kernel", "3,3"},
                          {"strides", "1,1"},    {"dilations", "1,1"}, {"pads_begin", "1,1"}, {"pads_end", "1,1"},
                          {"plan_threads", "2"}};
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    Tensor w(DType::kFloat32, {m, c, 3, 3}), b(DType::kFloat32, {m});
    for (int64_t i = 0; i < m * c * 9; ++i) w.data_as<float>()[i] = u(rng);
    for (int64_t i = 0; i < m; ++i) b.data_as<float>()[i] = u(rng);
    std::vector<float> x(static_cast<size_t>(c * h * h));
    for (float& v : x) v = u(rng);
    std::vector<double> mass;
    const std::vector<double> ref = conv3x3_reference(x, w, b, c, m, h, mass);
    Executable exe;
    conv_step(exe, {1, c, h, h}, w, b, {1, m, h, h}, params);
    exe.load();
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
        std::vector<float> y(ref.size(), -7.f);
        void* args[4] = {x.data(), w.data(), b.data(), y.data()};
        ThreadPool pool(threads);
        Status st = exe.run_kernel(0, args, pool.kernel_env());
        ASSERT_TRUE(st.ok()) << st.message();
        // F(4x4,3x3)'s transforms round more than a direct sum: within 1e-5 of the terms' size
        // (a direct float sum of 577 terms stays within ~1e-6 of it).
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * mass[i]) << c << "->" << m << " " << i;
        // The same parts at every thread count: the same bits.
        if (first.empty()) first = y;
        EXPECT_EQ(std::memcmp(y.data(), first.data(), y.size() * sizeof(float)), 0) << threads << " threads";
    }
}

TEST(ExternKernel, DnnlWinogradConvMatchesTheDirectSum) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // oneDNN's Winograd kernel (runtime/dnnl_kernels.cc winograd_shape), its parts planned for
    // two threads at every call: 64 -> 64 channels at 14x14 splits by channels (32 each), 64 ->
    // 32 by bands of 7 rows (channel halves of 16 would leave Winograd).
    const Pairs params = {{"wei", "oihw"},       {"src", "1,64,14,14"}, {"dst", "1,64,14,14"}, {"kernel", "3,3"},
                          {"strides", "1,1"},    {"dilations", "1,1"},  {"pads_begin", "1,1"},  {"pads_end", "1,1"},
                          {"plan_threads", "2"}, {"x", "0"}, {"w", "1"}, {"b", "2"}, {"y", "3"}};
    const std::string impl = dnnl_implementation("dnnl_conv", ExternParams::format(params));
    if (impl.find("wino") == std::string::npos) GTEST_SKIP() << "oneDNN offers no Winograd kernel here: " << impl;
    check_winograd_conv(64, 64, 14);
    check_winograd_conv(64, 32, 14);
    // From 28x28 outputs on, F(4x4,3x3) where oneDNN has it (prefer_f4x4; on avx512_core it has
    // both variants): until 2026-11-28 the walk to it never got past F(2x2,3x3).
    Pairs large = params;
    large[1].second = large[2].second = "1,64,28,28";
    const std::string impl28 = dnnl_implementation("dnnl_conv", ExternParams::format(large));
    if (impl28.find("avx512_core") != std::string::npos && impl28.find("wino") != std::string::npos)
        EXPECT_NE(impl28.find("wino_4x3"), std::string::npos) << impl28;
    EXPECT_EQ(impl.find("wino_4x3"), std::string::npos) << "14x14 keeps F(2x2,3x3): " << impl;
    check_winograd_conv(64, 64, 28);
    // The switch keeps the direct kernel, as does a plan made per call (no plan_threads); 16
    // channels stay direct (Winograd was slower there).
    ::setenv("KILN_CONV_WINOGRAD", "0", 1);
    const std::string off = dnnl_implementation("dnnl_conv", ExternParams::format(params));
    ::unsetenv("KILN_CONV_WINOGRAD");
    EXPECT_EQ(off.find("wino"), std::string::npos) << off;
    Pairs per_call = params;
    per_call.erase(per_call.begin() + 8);
    EXPECT_EQ(dnnl_implementation("dnnl_conv", ExternParams::format(per_call)).find("wino"), std::string::npos);
    Pairs narrow = params;
    narrow[1].second = narrow[2].second = "1,16,14,14";
    EXPECT_EQ(dnnl_implementation("dnnl_conv", ExternParams::format(narrow)).find("wino"), std::string::npos);
}

TEST(ExternKernel, DnnlConvRejectsBuffersOfTheWrongSize) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // Parameters that say 64 output channels over buffers of 32: a forged step must not load.
    Tensor w(DType::kFloat32, {32, 16, 4}), b(DType::kFloat32, {32});
    Executable exe;
    conv_step(exe, {1, 32, 20}, w, b, {1, 32, 40},
                               {{"kind", "deconv"}, {"wei", "iohw"}, {"src", "1,32,20"}, {"dst", "1,64,40"},
                                {"kernel", "4"}, {"groups", "2"}, {"strides", "2"}, {"dilations", "1"},
                                {"pads_begin", "1"}, {"pads_end", "1"}});
    try {
        exe.load();
        FAIL() << "dnnl_conv loaded over buffers smaller than its parameters say";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(std::string(e.what()).find("buffer sizes do not match"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'up'"), std::string::npos) << e.what();  // the node
    }
}

TEST(ExternKernel, DnnlMatmulRejectsBuffersOfTheWrongSize) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // Parameters that say A is [8, 16] over a buffer of [4, 16]: a forged step must not load.
    Tensor b(DType::kFloat32, {16, 8});
    Executable exe;
    exe.buffers.push_back({"A", DType::kFloat32, {4, 16}, BufferRole::kInput});
    BufferDesc bd{"B", DType::kFloat32, {16, 8}, BufferRole::kConstant};
    bd.constant = b;
    exe.buffers.push_back(bd);
    exe.buffers.push_back({"Y", DType::kFloat32, {8, 8}, BufferRole::kOutput});
    KernelDesc kd;
    kd.description = "MatMul";
    kd.extern_name = "dnnl_matmul";
    kd.extern_params = ExternParams::format({{"a", "0"}, {"bm", "1"}, {"out", "2"}, {"batch", "1"}, {"m", "8"},
                                            {"k", "16"}, {"n", "8"}, {"a_strides", "128,16,1"},
                                            {"b_strides", "0,8,1"}});
    exe.kernels.push_back(kd);
    exe.steps.push_back({0, {0, 1, 2}, "mm", 2});
    try {
        exe.load();
        FAIL() << "dnnl_matmul loaded over an A smaller than its parameters say";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(std::string(e.what()).find("A reaches 128 elements"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'mm'"), std::string::npos) << e.what();  // the node
    }
}

}  // namespace
}  // namespace kiln::runtime
