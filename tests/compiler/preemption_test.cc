// Preemption (kiln::Preemption, RunOptions::preempt) and RunOptions::max_threads through
// Session::run: runs preempted at random moments (a thread calling request() after random
// delays), resumed (sometimes with another max_threads) until they finish, must give exactly the
// outputs of an unpreempted run; a long generated kernel is cut inside; terminate still works;
// a suspended run survives the session compiling another specialization.
//
// The preemption latency benchmarks (request() -> run() returns, percentiles) are the disabled
// tests PreemptionBench.DISABLED_LatencyResNetLike and DISABLED_LatencyFeedForward:
//   build/bin/compiler_tests --gtest_also_run_disabled_tests --gtest_filter='PreemptionBench.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "../frontend/onnx_model_builder.h"
#include "kiln/kiln.h"
#include "runtime/preemption.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string save(const onnx::ModelProto& m, const std::string& name) {
    fs::path dir = fs::temp_directory_path() / ("kiln_preemption_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string path = (dir / name).string();
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
    Tensor t(DType::kFloat32, shape);
    std::vector<float> v = random_floats(static_cast<size_t>(t.numel()), seed, 1.0f);
    std::memcpy(t.data(), v.data(), t.nbytes());
    return t;
}

/// A ResNet-like stack on x [N, C, H, W]: `blocks` residual blocks of two 3x3 convolutions
/// (Conv+Relu, Conv, Add with the block's input, Relu); the residual Adds are computed in place.
onnx::ModelProto resnet_like(int64_t c, int64_t hw, int blocks) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), c, hw, hw});
    std::string cur = "x";
    uint32_t seed = 1;
    auto conv = [&](const std::string& in, const std::string& out) {
        const std::string w = out + "_w", b = out + "_b";
        add_float_init(g, w, {c, c, 3, 3}, random_floats(static_cast<size_t>(c * c * 9), seed++, 0.12f), true);
        add_float_init(g, b, {c}, random_floats(static_cast<size_t>(c), seed++, 0.1f), true);
        auto* n = add_node(g, "Conv", {in, w, b}, {out}, out);
        attr_ints(n, "kernel_shape", {3, 3});
        attr_ints(n, "pads", {1, 1, 1, 1});
    };
    for (int i = 0; i < blocks; ++i) {
        const std::string p = "b" + std::to_string(i) + "_";
        conv(cur, p + "c1");
        add_node(g, "Relu", {p + "c1"}, {p + "r1"}, p + "relu1");
        conv(p + "r1", p + "c2");
        add_node(g, "Add", {p + "c2", cur}, {p + "sum"}, p + "add");
        add_node(g, "Relu", {p + "sum"}, {p + "out"}, p + "relu2");
        cur = p + "out";
    }
    add_node(g, "GlobalAveragePool", {cur}, {"pooled"}, "gap");
    add_node(g, "Identity", {cur}, {"features"}, "id");
    add_output(g, "pooled", {std::string("N"), c, int64_t{1}, int64_t{1}});
    add_output(g, "features", {std::string("N"), c, hw, hw});
    return m;
}

/// y = x @ W for x [M, K], W [K, N]: one long kernel.
onnx::ModelProto big_matmul(int64_t m_, int64_t k, int64_t n) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {m_, k});
    add_float_init(g, "W", {k, n}, random_floats(static_cast<size_t>(k * n), 7, 0.05f), true);
    add_node(g, "MatMul", {"x", "W"}, {"y"}, "mm");
    add_output(g, "y", {m_, n});
    return m;
}

/// A transformer's feed-forward blocks on x [M, D] (BERT-base: 128 x 768, hidden 4D):
/// `blocks` times x = x + tanh(x @ W1) @ W2. The products are generated packed matmuls.
onnx::ModelProto ffn_like(int64_t m_, int64_t d, int blocks) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {m_, d});
    std::string cur = "x";
    uint32_t seed = 11;
    for (int i = 0; i < blocks; ++i) {
        const std::string p = "f" + std::to_string(i) + "_";
        add_float_init(g, p + "w1", {d, 4 * d}, random_floats(static_cast<size_t>(4 * d * d), seed++, 0.03f), true);
        add_float_init(g, p + "w2", {4 * d, d}, random_floats(static_cast<size_t>(4 * d * d), seed++, 0.02f), true);
        add_node(g, "MatMul", {cur, p + "w1"}, {p + "h"}, p + "mm1");
        add_node(g, "Tanh", {p + "h"}, {p + "t"}, p + "tanh");
        add_node(g, "MatMul", {p + "t", p + "w2"}, {p + "o"}, p + "mm2");
        add_node(g, "Add", {p + "o", cur}, {p + "sum"}, p + "add");
        cur = p + "sum";
    }
    add_node(g, "Identity", {cur}, {"y"}, "id");
    add_output(g, "y", {m_, d});
    return m;
}

void expect_identical(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].shape(), want[i].shape()) << what << ": output " << i;
        ASSERT_EQ(got[i].nbytes(), want[i].nbytes()) << what << ": output " << i;
        EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].nbytes()), 0)
            << what << ": output " << i << " differs from the unpreempted run";
    }
}

/// Calls p.request() after `delay` on its own thread (joined by the destructor).
class DelayedRequest {
public:
    DelayedRequest(Preemption& p, std::chrono::microseconds delay)
        : thread_([&p, delay, this] {
              std::this_thread::sleep_for(delay);
              requested_at = Clock::now();
              p.request();
          }) {}
    ~DelayedRequest() { join(); }
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    Clock::time_point requested_at;

private:
    std::thread thread_;
};

struct PreemptedRun {
    std::vector<Tensor> outputs;
    int suspensions = 0;
    int cut_inside = 0;
};

/// Runs `inputs` preempted after random delays (up to max_delay_us) until it finishes; each
/// resume may use another max_threads (from `thread_choices`).
PreemptedRun run_preempted(Session& s, const std::map<std::string, Tensor>& inputs, std::mt19937& rng,
                           int max_delay_us, const std::vector<int>& thread_choices) {
    Preemption p;
    PreemptedRun r;
    std::uniform_int_distribution<int> delay(0, max_delay_us);
    std::uniform_int_distribution<size_t> pick(0, thread_choices.size() - 1);
    for (int attempt = 0; attempt < 10000; ++attempt) {
        RunOptions o;
        o.preempt = &p;
        o.max_threads = thread_choices[pick(rng)];
        std::vector<Tensor> out;
        {
            DelayedRequest req(p, std::chrono::microseconds(delay(rng)));
            out = s.run(inputs, o);
        }
        p.clear_request();
        if (!p.suspended()) {
            EXPECT_FALSE(out.empty());
            r.outputs = std::move(out);
            return r;
        }
        EXPECT_TRUE(out.empty()) << "a suspended run returns no outputs";
        ++r.suspensions;
        r.cut_inside += p.state()->cut_inside_kernel ? 1 : 0;
    }
    ADD_FAILURE() << "the run never finished";
    return r;
}

/// A run whose preemption is requested before it starts, so it is cut for sure, then resumed to
/// its end: on a loaded machine the delayed requests above can all land after their runs (their
/// thread is not scheduled in time), and the tests' "some run was preempted" would fail by chance.
PreemptedRun run_cut_at_start(Session& s, const std::map<std::string, Tensor>& inputs) {
    Preemption p;
    PreemptedRun r;
    RunOptions o;
    o.preempt = &p;
    p.request();
    std::vector<Tensor> out = s.run(inputs, o);
    p.clear_request();
    EXPECT_TRUE(p.suspended()) << "a run requested to stop before it started was not suspended";
    EXPECT_TRUE(out.empty()) << "a suspended run returns no outputs";
    r.suspensions = p.suspended() ? 1 : 0;
    r.outputs = s.run(inputs, o);
    EXPECT_FALSE(p.suspended());
    return r;
}

/// The fastest of three unpreempted runs, in microseconds: it bounds the random delays.
int fastest_run_us(Session& s, const std::map<std::string, Tensor>& in) {
    int run_us = 1 << 30;
    for (int i = 0; i < 3; ++i) {
        auto t0 = Clock::now();
        (void)s.run(in);
        run_us = std::min(run_us, static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));
    }
    return run_us;
}

class PreemptionKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(PreemptionKernels, RandomPreemptionsGiveTheUnpreemptedResult) {
    SessionOptions opts;
    opts.threads = 4;
    opts.kernels = GetParam();
    opts.dims["N"] = 1;
    // One image of 64 channels: oneDNN splits convolutions by channel blocks, and a preemptible
    // call with 1 or 2 threads takes finer parts than an unpreempted one.
    auto s = Session::load(save(resnet_like(64, 16, 3), "resnet_like_" + GetParam() + ".onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({1, 64, 16, 16}, 3)}};
    const std::vector<Tensor> want = s->run(in);
    const int run_us = fastest_run_us(*s, in);
    std::mt19937 rng(42);
    int suspensions = 0, cut = 0;
    for (int i = 0; i < 30; ++i) {
        PreemptedRun r = run_preempted(*s, in, rng, std::max(50, run_us / 2), {0, 1, 2, 3, 4});
        expect_identical(r.outputs, want, "run " + std::to_string(i) + " (" + GetParam() + ")");
        suspensions += r.suspensions;
        cut += r.cut_inside;
    }
    if (suspensions == 0) {  // the load kept every timed request out of its run
        PreemptedRun r = run_cut_at_start(*s, in);
        expect_identical(r.outputs, want, "a run cut at its start (" + GetParam() + ")");
        suspensions += r.suspensions;
    }
    EXPECT_GT(suspensions, 0) << "no run was ever preempted";
    std::printf("%s: %d suspensions, %d inside a kernel (unpreempted run: %d us)\n", GetParam().c_str(), suspensions,
                cut, run_us);
    // Runs without preemption on the same session are unaffected.
    expect_identical(s->run(in), want, "an unpreempted run after preempted ones");
}

TEST_P(PreemptionKernels, DigitsModel) {
    SessionOptions opts;
    opts.threads = 3;
    opts.kernels = GetParam();
    opts.dims["N"] = 256;  // long enough (~1 ms) for a delayed request to land inside a run
    auto s = Session::load(std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx", opts);
    std::map<std::string, Tensor> in{{"image", random_tensor({256, 1, 8, 8}, 5)}};
    const std::vector<Tensor> want = s->run(in);
    // Delays up to half a run (at least 20 us), so that most runs are cut (REVIEW 12: the test
    // used a fixed 200 us and never checked that any run was suspended).
    const int max_delay = std::max(20, fastest_run_us(*s, in) / 2);
    std::printf("digits: max delay %d us\n", max_delay);
    std::mt19937 rng(7);
    int suspensions = 0;
    for (int i = 0; i < 30; ++i) {
        PreemptedRun r = run_preempted(*s, in, rng, max_delay, {0, 1, 2, 3});
        expect_identical(r.outputs, want, "digits run " + std::to_string(i));
        suspensions += r.suspensions;
    }
    if (suspensions == 0) {  // the load kept every timed request out of its run
        PreemptedRun r = run_cut_at_start(*s, in);
        expect_identical(r.outputs, want, "a digits run cut at its start");
        suspensions += r.suspensions;
    }
    EXPECT_GT(suspensions, 0) << "no digits run was ever preempted";
}

TEST_P(PreemptionKernels, MaxThreadsGivesTheSameResult) {
    SessionOptions opts;
    opts.threads = 4;
    opts.kernels = GetParam();
    opts.dims["N"] = 1;
    auto s = Session::load(save(resnet_like(32, 16, 2), "max_threads_" + GetParam() + ".onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({1, 32, 16, 16}, 9)}};
    const std::vector<Tensor> want = s->run(in);
    for (int t : {1, 2, 3, 4, 8}) {
        RunOptions o;
        o.max_threads = t;
        expect_identical(s->run(in, o), want, "max_threads " + std::to_string(t));
    }
    RunOptions bad;
    bad.max_threads = -1;
    EXPECT_THROW(s->run(in, bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, PreemptionKernels, ::testing::Values("generated", "dnnl"));

TEST(Preemption, RequestedBeforeTheRunSuspendsBeforeTheFirstKernel) {
    SessionOptions opts;
    opts.threads = 2;
    opts.dims["N"] = 1;
    auto s = Session::load(save(resnet_like(8, 8, 1), "before.onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({1, 8, 8, 8}, 11)}};
    const std::vector<Tensor> want = s->run(in);
    Preemption p;
    p.request();
    RunOptions o;
    o.preempt = &p;
    EXPECT_TRUE(s->run(in, o).empty());
    ASSERT_TRUE(p.suspended());
    EXPECT_EQ(p.state()->resume_step, 0u);
    EXPECT_FALSE(p.state()->cut_inside_kernel);
    // Still requested: resuming suspends again at once.
    EXPECT_TRUE(s->run(in, o).empty());
    EXPECT_TRUE(p.suspended());
    p.clear_request();
    expect_identical(s->run(in, o), want, "resumed");
    EXPECT_FALSE(p.suspended());
    // The object is reusable for the next run.
    expect_identical(s->run(in, o), want, "second run");
}

TEST(Preemption, ResetDropsTheSuspendedRun) {
    SessionOptions opts;
    opts.threads = 2;
    opts.dims["N"] = 1;
    auto s = Session::load(save(resnet_like(8, 8, 1), "reset.onnx"), opts);
    std::map<std::string, Tensor> a{{"x", random_tensor({1, 8, 8, 8}, 12)}};
    std::map<std::string, Tensor> b{{"x", random_tensor({1, 8, 8, 8}, 13)}};
    const std::vector<Tensor> want_b = s->run(b);
    Preemption p;
    p.request();
    RunOptions o;
    o.preempt = &p;
    EXPECT_TRUE(s->run(a, o).empty());
    ASSERT_TRUE(p.suspended());
    p.reset();
    EXPECT_FALSE(p.suspended());
    p.clear_request();
    expect_identical(s->run(b, o), want_b, "a fresh run after reset");
}

// The trace fields (the server's KILN_PREEMPT_TRACE) name the step that held a stop up: none
// for a run stopped before its first step, the cut kernel for a run cut inside one.
TEST(Preemption, TheStateNamesTheStepThatHeldTheStop) {
    SessionOptions opts;
    opts.threads = 2;
    opts.kernels = "generated";
    auto s = Session::load(save(big_matmul(512, 1024, 1024), "big_matmul_trace.onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({512, 1024}, 19)}};
    const std::vector<Tensor> want = s->run(in);
    {
        PreemptedRun r = run_cut_at_start(*s, in);  // resumed to its end inside
        expect_identical(r.outputs, want, "a run cut at its start");
    }
    Preemption p;
    RunOptions o;
    o.preempt = &p;
    p.request();
    ASSERT_TRUE(s->run(in, o).empty());
    EXPECT_EQ(p.state()->stop_node, "") << "no step ran";
    EXPECT_EQ(p.state()->stop_kernel, "");
    EXPECT_GE(p.state()->stopped_at_ns, p.state()->requested_at_ns.load());
    p.reset();
    auto t0 = Clock::now();
    (void)s->run(in);
    const auto run_time = Clock::now() - t0;
    for (int attempt = 0; attempt < 60; ++attempt) {
        p.reset();
        p.clear_request();
        {
            const auto delay = std::chrono::duration_cast<std::chrono::microseconds>(run_time * (1 + attempt % 6) / 8);
            DelayedRequest req(p, delay);
            if (!s->run(in, o).empty()) continue;  // finished before the request
        }
        if (!p.state()->cut_inside_kernel) continue;
        EXPECT_EQ(p.state()->stop_node, "mm");
        EXPECT_NE(p.state()->stop_kernel.find("MatMul"), std::string::npos) << p.state()->stop_kernel;
        EXPECT_TRUE(p.state()->stop_restartable) << "y = x @ W reads nothing it writes";
        EXPECT_GE(p.state()->stopped_at_ns, p.state()->requested_at_ns.load());
        p.clear_request();
        expect_identical(s->run(in, o), want, "the resumed matmul");
        return;
    }
    ADD_FAILURE() << "no request ever landed inside the kernel";
}

TEST(Preemption, ALongGeneratedKernelIsCutInside) {
    SessionOptions opts;
    opts.threads = 2;
    opts.kernels = "generated";
    auto s = Session::load(save(big_matmul(512, 1024, 1024), "big_matmul.onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({512, 1024}, 17)}};
    const std::vector<Tensor> want = s->run(in);
    // An independent check of a few elements against a plain dot product.
    {
        std::vector<float> w = random_floats(1024 * 1024, 7, 0.05f);
        const float* x = in.at("x").data_as<float>();
        for (int64_t i : {0, 100, 511})
            for (int64_t j : {0, 517, 1023}) {
                double acc = 0;
                for (int64_t k = 0; k < 1024; ++k) acc += static_cast<double>(x[i * 1024 + k]) * w[k * 1024 + j];
                EXPECT_NEAR(want[0].data_as<float>()[i * 1024 + j], acc, 1e-3) << i << "," << j;
            }
    }
    auto t0 = Clock::now();
    (void)s->run(in);
    const auto run_time = Clock::now() - t0;
    bool cut = false;
    // Requests land at 1/8 .. 6/8 of the measured run time: on a loaded machine (ctest -j2)
    // one delay alone may keep missing the kernel.
    for (int attempt = 0; attempt < 60 && !cut; ++attempt) {
        Preemption p;
        RunOptions o;
        o.preempt = &p;
        std::vector<Tensor> out;
        {
            DelayedRequest req(p, std::chrono::duration_cast<std::chrono::microseconds>(run_time * (1 + attempt % 6) / 8));
            out = s->run(in, o);
        }
        if (!p.suspended()) continue;  // the machine was faster than measured: try again
        cut = p.state()->cut_inside_kernel;
        EXPECT_EQ(p.state()->resume_step, 0u) << "the model is one step";
        p.clear_request();
        o.max_threads = 1 + attempt % 2;
        expect_identical(s->run(in, o), want, "the resumed matmul");
        EXPECT_FALSE(p.suspended());
    }
    EXPECT_TRUE(cut) << "no request ever landed inside the kernel";
}

TEST(Preemption, TerminateStillWorks) {
    SessionOptions opts;
    opts.threads = 2;
    opts.dims["N"] = 1;
    auto s = Session::load(save(resnet_like(8, 8, 2), "terminate.onnx"), opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({1, 8, 8, 8}, 19)}};
    const std::vector<Tensor> want = s->run(in);
    std::atomic<bool> stop{true};
    Preemption p;
    RunOptions o;
    o.preempt = &p;
    o.terminate = &stop;
    try {
        s->run(in, o);
        ADD_FAILURE() << "expected kCancelled";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCancelled) << e.what();
    }
    EXPECT_FALSE(p.suspended());
    // Terminating a suspended run drops it.
    stop = false;
    p.request();
    EXPECT_TRUE(s->run(in, o).empty());
    ASSERT_TRUE(p.suspended());
    stop = true;
    p.clear_request();
    EXPECT_THROW(s->run(in, o), Error);
    EXPECT_FALSE(p.suspended());
    stop = false;
    expect_identical(s->run(in, o), want, "after a terminated run");
}

TEST(Preemption, SuspendedRunSurvivesAnotherSpecialization) {
    SessionOptions opts;
    opts.threads = 2;
    auto s = Session::load(save(resnet_like(8, 8, 2), "specializations.onnx"), opts);
    std::map<std::string, Tensor> two{{"x", random_tensor({2, 8, 8, 8}, 21)}};
    std::map<std::string, Tensor> three{{"x", random_tensor({3, 8, 8, 8}, 22)}};
    const std::vector<Tensor> want_two = s->run(two);
    const std::vector<Tensor> want_three = s->run(three);  // the session now runs N=3
    (void)s->run(two);                                     // and N=2 again
    Preemption p;
    RunOptions o;
    o.preempt = &p;
    // Suspend part-way through an N=2 run.
    const int run_us = std::max(50, fastest_run_us(*s, two));
    for (int tries = 0; tries < 1000 && !(p.suspended() && p.state()->resume_step > 0); ++tries) {
        p.reset();
        p.clear_request();
        DelayedRequest req(p, std::chrono::microseconds(tries % run_us));
        std::vector<Tensor> out = s->run(two, o);
        if (!p.suspended()) expect_identical(out, want_two, "an N=2 run that finished");
    }
    if (!p.suspended()) {  // the load kept every timed request out of its run: cut one at its start
        p.reset();
        p.request();
        EXPECT_TRUE(s->run(two, o).empty());
    }
    ASSERT_TRUE(p.suspended());
    expect_identical(s->run(three), want_three, "N=3 while an N=2 run is suspended");
    p.clear_request();
    expect_identical(s->run(two, o), want_two, "the resumed N=2 run");
}

TEST(Preemption, APreemptionBelongsToOneSession) {
    SessionOptions opts;
    opts.threads = 2;
    opts.dims["N"] = 1;
    const std::string path = save(resnet_like(8, 8, 1), "two_sessions.onnx");
    auto a = Session::load(path, opts);
    auto b = Session::load(path, opts);
    std::map<std::string, Tensor> in{{"x", random_tensor({1, 8, 8, 8}, 23)}};
    Preemption p;
    p.request();
    RunOptions o;
    o.preempt = &p;
    EXPECT_TRUE(a->run(in, o).empty());
    ASSERT_TRUE(p.suspended());
    p.clear_request();
    try {
        b->run(in, o);
        ADD_FAILURE() << "expected kInvalidArgument";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
    EXPECT_TRUE(p.suspended());
    a.reset();  // the session goes; its suspended run's memory stays valid until reset()
    p.reset();
    expect_identical(b->run(in, o), b->run(in), "a fresh run in the other session");
}

/// Preemption latency: request() -> run() returns, at random moments of runs of `model` (file)
/// on `in`. Prints percentiles; asserts nothing about time.
void latency_bench(const std::string& label, const std::string& model, const std::map<std::string, Tensor>& in,
                   const std::string& kernels) {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    SessionOptions opts;
    opts.threads = threads;
    opts.kernels = kernels;
    opts.dims["N"] = 1;
    auto s = Session::load(model, opts);
    (void)s->run(in);
    auto t0 = Clock::now();
    (void)s->run(in);
    const int run_us = static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> delay(0, run_us);
    std::vector<double> lat_us;
    int cut = 0;
    for (int i = 0; i < 400; ++i) {
        Preemption p;
        RunOptions o;
        o.preempt = &p;
        Clock::time_point returned, requested;
        {
            DelayedRequest req(p, std::chrono::microseconds(delay(rng)));
            (void)s->run(in, o);
            returned = Clock::now();
            req.join();
            requested = req.requested_at;
            p.clear_request();
            if (p.suspended()) {
                lat_us.push_back(std::chrono::duration<double, std::micro>(returned - requested).count());
                cut += p.state()->cut_inside_kernel ? 1 : 0;
            }
        }
    }
    std::sort(lat_us.begin(), lat_us.end());
    auto pct = [&](double q) { return lat_us.empty() ? 0.0 : lat_us[static_cast<size_t>(q * (lat_us.size() - 1))]; };
    std::printf("preemption latency, %s, %s kernels, %d threads, run %d us: %zu preemptions (%d inside a kernel): "
                "p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n",
                label.c_str(), kernels.c_str(), threads, run_us, lat_us.size(), cut, pct(0.5), pct(0.9), pct(0.99),
                pct(1.0));
}

TEST(PreemptionBench, DISABLED_LatencyResNetLike) {
    const std::string model = save(resnet_like(64, 56, 4), "bench_resnet_like.onnx");
    const std::map<std::string, Tensor> in{{"x", random_tensor({1, 64, 56, 56}, 29)}};
    latency_bench("ResNet-like", model, in, "generated");
    latency_bench("ResNet-like", model, in, "dnnl");
}

// BERT-base's feed-forward products (128 x 768 x 3072 and back), where one iteration of a
// (column tile) parallel loop held 6-25 M multiply-adds before row tiles joined it.
TEST(PreemptionBench, DISABLED_LatencyFeedForward) {
    const std::string model = save(ffn_like(128, 768, 3), "bench_ffn_like.onnx");
    latency_bench("BERT-base FFN-like", model, {{"x", random_tensor({128, 768}, 31)}}, "generated");
}

}  // namespace
}  // namespace kiln
