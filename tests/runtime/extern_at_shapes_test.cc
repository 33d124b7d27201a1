// A oneDNN convolution on symbolic batch x H x W (runtime/extern_at_shapes.h): one step run at
// several shapes (odd sizes, a stride-2 window with a fused Relu, a depthwise conv; plain NCHW and
// Kiln's blocked NCHW16c) against a direct loop nest; shapes made once and kept least recently
// used out; a shape the window cannot take is an error naming the dims; a run at new dims makes
// its steps' kernels together first (runtime/prepare_externs.h), each once.
#include "runtime/extern_at_shapes.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <tuple>

#include "runtime/caching_allocator.h"
#include "runtime/executable.h"
#include "runtime/prepare_externs.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

struct Conv {
    int64_t c, m, groups, k, stride, pad;
    std::string post;  // "" or "relu"
};

/// The conv's parameters as a compile would write them at some shape (the run overrides src/dst).
std::string params_of(const Conv& cv) {
    const std::string k = std::to_string(cv.k) + "," + std::to_string(cv.k);
    Pairs p = {{"wei", "oihw"},        {"src", "1," + std::to_string(cv.c) + ",1,1"},
               {"dst", "1," + std::to_string(cv.m) + ",1,1"},
               {"kernel", k},          {"groups", std::to_string(cv.groups)},
               {"strides", std::to_string(cv.stride) + "," + std::to_string(cv.stride)},
               {"dilations", "1,1"},   {"pads_begin", std::to_string(cv.pad) + "," + std::to_string(cv.pad)},
               {"pads_end", std::to_string(cv.pad) + "," + std::to_string(cv.pad)},
               {"x", "0"}, {"w", "1"}, {"b", "2"}, {"y", "3"}};
    if (!cv.post.empty()) p.push_back({"post", cv.post});
    return ExternParams::format(p);
}

/// One dnnl_conv step over X [n, c, h, w] (dims 0, 1, 2) and Y [n, m, ho, wo] (dims 0, 3, 4).
void conv_exe(Executable& exe, const Conv& cv, const Tensor& w, const Tensor& b) {
    exe.dims = {"n", "h", "w", "ho", "wo"};
    BufferDesc x{"X", DType::kFloat32, {1, cv.c, 1, 1}, BufferRole::kInput};
    x.dim_of = {0, -1, 1, 2};
    exe.buffers.push_back(x);
    BufferDesc wd{"W", DType::kFloat32, w.shape(), BufferRole::kConstant};
    wd.constant = w;
    exe.buffers.push_back(wd);
    BufferDesc bd{"B", DType::kFloat32, b.shape(), BufferRole::kConstant};
    bd.constant = b;
    exe.buffers.push_back(bd);
    BufferDesc y{"Y", DType::kFloat32, {1, cv.m, 1, 1}, BufferRole::kOutput};
    y.dim_of = {0, -1, 3, 4};
    exe.buffers.push_back(y);
    KernelDesc kd;
    kd.description = "Conv";
    kd.extern_name = "dnnl_conv";
    kd.extern_params = params_of(cv);
    kd.takes_dims = true;
    exe.kernels.push_back(kd);
    StepDesc s{0, {0, 1, 2, 3}, "conv", 3};
    s.dims = {0, 1, 2, 3, 4};
    exe.steps.push_back(s);
}

/// ONNX Conv, NCHW, as a direct loop nest in double.
std::vector<double> conv_reference(const Conv& cv, const std::vector<float>& x, const Tensor& w, const Tensor& b,
                                   int64_t n, int64_t h, int64_t wd, int64_t ho, int64_t wo) {
    const int64_t cg = cv.c / cv.groups, mg = cv.m / cv.groups;
    std::vector<double> y(static_cast<size_t>(n * cv.m * ho * wo));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < cv.m; ++o)
            for (int64_t r = 0; r < ho; ++r)
                for (int64_t q = 0; q < wo; ++q) {
                    double acc = b.data_as<float>()[o];
                    for (int64_t ci = 0; ci < cg; ++ci)
                        for (int64_t ky = 0; ky < cv.k; ++ky)
                            for (int64_t kx = 0; kx < cv.k; ++kx) {
                                const int64_t yy = r * cv.stride - cv.pad + ky, xx = q * cv.stride - cv.pad + kx;
                                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                                const int64_t chan = (o / mg) * cg + ci;
                                acc += double(x[((i * cv.c + chan) * h + yy) * wd + xx]) *
                                       w.data_as<float>()[((o * cg + ci) * cv.k + ky) * cv.k + kx];
                            }
                    y[((i * cv.m + o) * ho + r) * wo + q] = cv.post == "relu" ? std::max(acc, 0.0) : acc;
                }
    return y;
}

/// Runs `exe`'s conv at (n, h, w) on `threads` threads against the loop nest.
void check_at(const Executable& exe, const Conv& cv, const Tensor& w, const Tensor& b, int64_t n, int64_t h,
              int64_t wd, int threads) {
    const int64_t ho = (h + 2 * cv.pad - cv.k) / cv.stride + 1, wo = (wd + 2 * cv.pad - cv.k) / cv.stride + 1;
    std::mt19937 rng(static_cast<unsigned>(n * 1000 + h * 31 + wd));
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(static_cast<size_t>(n * cv.c * h * wd)), y(static_cast<size_t>(n * cv.m * ho * wo), -7.f);
    for (float& v : x) v = u(rng);
    const int64_t dims[5] = {n, h, wd, ho, wo};
    void* args[4] = {x.data(), const_cast<void*>(w.data()), const_cast<void*>(b.data()), y.data()};
    ThreadPool pool(threads);
    const Status st = exe.run_kernel(0, args, dims, pool.kernel_env());
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<double> ref = conv_reference(cv, x, w, b, n, h, wd, ho, wo);
    // Tolerance: float FMA accumulation of at most 72 terms of |x| < 1.
    for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-4 + 1e-5 * std::fabs(ref[i])) << "at " << n << "x" << h << "x" << wd << ", " << i;
}

std::pair<Tensor, Tensor> weights(const Conv& cv) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    Tensor w(DType::kFloat32, {cv.m, cv.c / cv.groups, cv.k, cv.k}), b(DType::kFloat32, {cv.m});
    for (int64_t i = 0; i < w.numel(); ++i) w.data_as<float>()[i] = u(rng);
    for (int64_t i = 0; i < cv.m; ++i) b.data_as<float>()[i] = u(rng);
    return {w, b};
}

TEST(ExternAtShapes, StridedConvMatchesLoopsAtEveryShape) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Conv cv{8, 16, 1, 3, 2, 1, "relu"};
    auto [w, b] = weights(cv);
    Executable exe;
    conv_exe(exe, cv, w, b);
    exe.load();
    for (auto [n, h, wd] : std::vector<std::array<int64_t, 3>>{{1, 17, 23}, {2, 32, 32}, {1, 8, 5}, {1, 17, 23}})
        for (int threads : {1, 2}) check_at(exe, cv, w, b, n, h, wd, threads);
}

TEST(ExternAtShapes, DepthwiseConvMatchesLoopsAtEveryShape) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Conv cv{16, 16, 16, 3, 1, 1, ""};
    auto [w, b] = weights(cv);
    Executable exe;
    conv_exe(exe, cv, w, b);
    exe.load();
    for (auto [n, h, wd] : std::vector<std::array<int64_t, 3>>{{1, 9, 14}, {3, 20, 7}, {1, 1, 1}})
        check_at(exe, cv, w, b, n, h, wd, 2);
}

TEST(ExternAtShapes, BlockedActivationsMatchLoopsAtEveryShape) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // X [n, 1, h, w, 16] and Y [n, 2, ho, wo, 16]: Kiln's NCHW16c, the layout its blocked convs use.
    const Conv cv{16, 32, 1, 3, 2, 1, ""};
    auto [w, b] = weights(cv);
    std::string params = params_of(cv) + ";src_block=16;dst_block=16";
    std::vector<ExternArg> args = {{DType::kFloat32, {1, 1, 1, 1, 16}, nullptr, {0, -1, 1, 2, -1}},
                                   {DType::kFloat32, w.shape(), w.data(), {}},
                                   {DType::kFloat32, b.shape(), b.data(), {}},
                                   {DType::kFloat32, {1, 2, 1, 1, 16}, nullptr, {0, -1, 3, 4, -1}}};
    ExternAtShapes k("dnnl_conv", find_extern_kernel("dnnl_conv"), params, args, 5);
    ThreadPool pool(2);
    for (auto [n, h, wd] : std::vector<std::array<int64_t, 3>>{{1, 13, 9}, {2, 24, 31}}) {
        const int64_t ho = (h - 1) / 2 + 1, wo = (wd - 1) / 2 + 1;  // 3 taps, pads 1, stride 2
        std::vector<float> x(static_cast<size_t>(n * 16 * h * wd)), xb(x.size());
        std::mt19937 rng(static_cast<unsigned>(h * 7 + wd));
        std::uniform_real_distribution<float> u(-1, 1);
        for (float& v : x) v = u(rng);
        for (int64_t i = 0; i < n; ++i)  // NCHW -> NCHW16c (one block of 16)
            for (int64_t c = 0; c < 16; ++c)
                for (int64_t p = 0; p < h * wd; ++p) xb[(i * h * wd + p) * 16 + c] = x[(i * 16 + c) * h * wd + p];
        std::vector<float> yb(static_cast<size_t>(n * 32 * ho * wo), -7.f);
        void* argv[4] = {xb.data(), const_cast<void*>(w.data()), const_cast<void*>(b.data()), yb.data()};
        const int64_t dims[5] = {n, h, wd, ho, wo};
        const Status st = k.run_at(argv, dims, pool.kernel_env(), 2);
        ASSERT_TRUE(st.ok()) << st.message();
        const std::vector<double> ref = conv_reference(cv, x, w, b, n, h, wd, ho, wo);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t m = 0; m < 32; ++m)
                for (int64_t p = 0; p < ho * wo; ++p) {
                    const double want = ref[static_cast<size_t>((i * 32 + m) * ho * wo + p)];
                    const float got = yb[static_cast<size_t>(((i * 2 + m / 16) * ho * wo + p) * 16 + m % 16)];
                    ASSERT_NEAR(got, want, 1e-4 + 1e-5 * std::fabs(want)) << n << "x" << h << "x" << wd;
                }
    }
}

TEST(ExternAtShapes, RunsInASymbolicExecutableAtEveryInputShape) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // A same-padded 3x3 conv keeps H and W: X [n, 8, h, w] -> Y [n, 16, h, w], the dims bound
    // from the input per run (runtime/dims_plan.h), the output sized by them.
    const Conv cv{8, 16, 1, 3, 1, 1, "relu"};
    auto [w, b] = weights(cv);
    auto exe = std::make_shared<Executable>();
    conv_exe(*exe, cv, w, b);
    exe->dims = {"n", "h", "w"};
    exe->buffers[3].dim_of = {0, -1, 1, 2};
    exe->steps[0].dims = {0, 1, 2};
    exe->inputs = {0};
    exe->outputs = {3};
    exe->load();
    ThreadPool pool(2);
    auto alloc = make_session_allocator(0);
    SequentialExecutor run(exe, &pool, alloc.get());
    for (auto [n, h, wd] : std::vector<std::array<int64_t, 3>>{{1, 12, 7}, {3, 5, 16}, {1, 12, 7}}) {
        Tensor x(DType::kFloat32, {n, 8, h, wd});
        std::mt19937 rng(static_cast<unsigned>(n + h + wd));
        std::uniform_real_distribution<float> u(-1, 1);
        for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
        std::vector<Tensor> out;
        const Status st = run.run({x}, out);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_EQ(out.size(), 1u);
        ASSERT_EQ(out[0].shape(), (Shape{n, 16, h, wd}));
        const std::vector<float> xv(x.data_as<float>(), x.data_as<float>() + x.numel());
        const std::vector<double> ref = conv_reference(cv, xv, w, b, n, h, wd, h, wd);
        for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(out[0].data_as<float>()[i], ref[i], 1e-4 + 1e-5 * std::fabs(ref[i])) << n << "x" << h << "x" << wd;
    }
}

TEST(ExternAtShapes, KeepsTheMostRecentShapes) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Conv cv{8, 16, 1, 3, 1, 1, ""};
    auto [w, b] = weights(cv);
    std::vector<ExternArg> args = {{DType::kFloat32, {1, 8, 1, 1}, nullptr, {0, -1, 1, 2}},
                                   {DType::kFloat32, w.shape(), w.data(), {}},
                                   {DType::kFloat32, b.shape(), b.data(), {}},
                                   {DType::kFloat32, {1, 16, 1, 1}, nullptr, {0, -1, 1, 2}}};
    ExternAtShapes k("dnnl_conv", find_extern_kernel("dnnl_conv"), params_of(cv), args, 3, 2);
    ThreadPool pool(1);
    std::vector<float> x(8 * 12 * 12), y(16 * 12 * 12);
    void* argv[4] = {x.data(), const_cast<void*>(w.data()), const_cast<void*>(b.data()), y.data()};
    for (int64_t s : {4, 6, 8, 4, 8}) {  // 4 is dropped by 8, made again, then 8 is held
        const int64_t dims[3] = {1, s, s};
        ASSERT_TRUE(k.run_at(argv, dims, pool.kernel_env(), 1).ok());
    }
    EXPECT_EQ(k.made(), 4u);
    EXPECT_EQ(k.held(), 2u);
    // Batch 0: nothing to compute (held as a shape without a kernel).
    const int64_t empty[3] = {0, 4, 4};
    EXPECT_TRUE(k.run_at(argv, empty, pool.kernel_env(), 1).ok());
    EXPECT_EQ(k.made(), 5u);
}

TEST(ExternAtShapes, ShapesTheWindowCannotTakeAreErrors) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Conv cv{8, 16, 1, 3, 2, 0, ""};
    auto [w, b] = weights(cv);
    Executable exe;
    conv_exe(exe, cv, w, b);
    exe.load();
    ThreadPool pool(1);
    std::vector<float> x(8 * 10 * 10), y(16 * 10 * 10);
    void* args[4] = {x.data(), const_cast<void*>(w.data()), const_cast<void*>(b.data()), y.data()};
    const int64_t wrong_out[5] = {1, 9, 9, 5, 4};  // the window gives 4 x 4
    Status st = exe.run_kernel(0, args, wrong_out, pool.kernel_env());
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(st.message().find("1,16,5,4"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("1,16,4,4"), std::string::npos) << st.message();
    const int64_t too_small[5] = {1, 2, 9, 1, 4};  // H 2 < the 3-tap window, no pads
    st = exe.run_kernel(0, args, too_small, pool.kernel_env());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("smaller than the window"), std::string::npos) << st.message();
}

/// Two same-padded 3x3 convs in sequence, X [n, 8, h, w] -> Y [n, 16, h, w] -> Z [n, 16, h, w],
/// on the dims (n, h, w) bound from X per run.
struct TwoConvs {
    Conv first{8, 16, 1, 3, 1, 1, "relu"}, second{16, 16, 1, 3, 1, 1, ""};
    Tensor w1, b1, w2, b2;
    std::shared_ptr<Executable> exe = std::make_shared<Executable>();

    TwoConvs() {
        std::tie(w1, b1) = weights(first);
        std::tie(w2, b2) = weights(second);
        exe->dims = {"n", "h", "w"};
        auto add = [&](const char* name, Shape shape, BufferRole role, std::vector<int> dim_of, Tensor constant) {
            BufferDesc d{name, DType::kFloat32, std::move(shape), role};
            d.dim_of = std::move(dim_of);
            d.constant = std::move(constant);
            exe->buffers.push_back(d);
        };
        add("X", {1, 8, 1, 1}, BufferRole::kInput, {0, -1, 1, 2}, {});
        add("W1", w1.shape(), BufferRole::kConstant, {}, w1);
        add("B1", b1.shape(), BufferRole::kConstant, {}, b1);
        add("Y", {1, 16, 1, 1}, BufferRole::kIntermediate, {0, -1, 1, 2}, {});
        add("W2", w2.shape(), BufferRole::kConstant, {}, w2);
        add("B2", b2.shape(), BufferRole::kConstant, {}, b2);
        add("Z", {1, 16, 1, 1}, BufferRole::kOutput, {0, -1, 1, 2}, {});
        for (const Conv* cv : {&first, &second}) {
            KernelDesc kd;
            kd.description = "Conv";
            kd.extern_name = "dnnl_conv";
            kd.extern_params = params_of(*cv);
            kd.takes_dims = true;
            exe->kernels.push_back(kd);
        }
        StepDesc one{0, {0, 1, 2, 3}, "conv1", 3}, two{1, {3, 4, 5, 6}, "conv2", 3};
        one.dims = two.dims = {0, 1, 2};
        exe->steps = {one, two};
        exe->inputs = {0};
        exe->outputs = {6};
        exe->load();
    }
    const ExternAtShapes& kernel(int k) const { return dynamic_cast<const ExternAtShapes&>(*exe->extern_kernel(k)); }
    /// Runs the executable at (n, h, w) against the loop nests, in double.
    void check(SequentialExecutor& run, int64_t n, int64_t h, int64_t wd) const {
        Tensor x(DType::kFloat32, {n, 8, h, wd});
        std::mt19937 rng(static_cast<unsigned>(n * 100 + h * 10 + wd));
        std::uniform_real_distribution<float> u(-1, 1);
        for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
        std::vector<Tensor> out;
        const Status st = run.run({x}, out);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_EQ(out.at(0).shape(), (Shape{n, 16, h, wd}));
        const std::vector<double> y = conv_reference(first, std::vector<float>(x.data_as<float>(), x.data_as<float>() + x.numel()),
                                                     w1, b1, n, h, wd, h, wd);
        const std::vector<double> z = conv_reference(second, std::vector<float>(y.begin(), y.end()), w2, b2, n, h, wd, h, wd);
        // Tolerance: two float accumulations of at most 144 terms, the second of values below 10.
        for (size_t i = 0; i < z.size(); ++i)
            ASSERT_NEAR(out[0].data_as<float>()[i], z[i], 1e-3 + 1e-5 * std::fabs(z[i])) << n << "x" << h << "x" << wd;
    }
};

TEST(ExternAtShapes, PreparedKernelsOfNewDimsAreMadeOnceAndRunByTheSteps) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    TwoConvs m;
    ThreadPool pool(2);
    prepare_externs_at(*m.exe, {2, 9, 11}, pool.kernel_env());
    for (int k : {0, 1}) EXPECT_EQ(m.kernel(k).made(), 1u) << "kernel " << k;
    auto alloc = make_session_allocator(0);
    SequentialExecutor run(m.exe, &pool, alloc.get());
    m.check(run, 2, 9, 11);
    for (int k : {0, 1}) EXPECT_EQ(m.kernel(k).made(), 1u) << "the run found kernel " << k << " made";
    m.check(run, 1, 5, 6);  // new dims: the run prepares both kernels before its first step
    m.check(run, 1, 5, 6);
    m.check(run, 2, 9, 11);  // still held
    for (int k : {0, 1}) EXPECT_EQ(m.kernel(k).made(), 2u) << "kernel " << k;
}

TEST(ExternAtShapes, AKernelThatCannotBePreparedIsLeftToItsStep) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Conv cv{8, 16, 1, 3, 1, 0, ""};  // no pads: H and W of at least 3
    auto [w, b] = weights(cv);
    Executable exe;
    conv_exe(exe, cv, w, b);
    exe.load();
    ThreadPool pool(2);
    const int64_t too_small[5] = {1, 2, 9, 0, 7};
    exe.extern_kernel(0)->prepare_at(too_small, 2);  // no throw
    std::vector<float> x(8 * 2 * 9), y(16 * 7);
    void* args[4] = {x.data(), const_cast<void*>(w.data()), const_cast<void*>(b.data()), y.data()};
    const Status st = exe.run_kernel(0, args, too_small, pool.kernel_env());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("smaller than the window"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kiln::runtime
