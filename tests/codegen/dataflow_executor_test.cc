// DataflowExecutor over hand-built Executables whose kernels are compiled from C strings (lives
// with the codegen tests because runtime_tests link the runtime only). Results are checked
// against naive loops in the test and against the SequentialExecutor, bitwise; thread ids
// recorded by the kernels show the thread-count options are honoured.
#include "runtime/dataflow_executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <set>

#include "codegen/compile_driver.h"
#include "runtime/async_kernel.h"
#include "runtime/sequential_executor.h"

namespace kiln::runtime {
namespace {

constexpr int kLen = 16;  // elements of every buffer of the random DAGs

const char* kKernels = R"C(
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <time.h>
typedef void (*kiln_task_fn)(int64_t begin, int64_t end, void* ctx);
typedef struct kiln_kernel_env {
    void* pool;
    void (*parallel_for)(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
} kiln_kernel_env;

typedef struct { const uint32_t* a; const uint32_t* b; uint32_t* c; } add_ctx;
static void add_task(int64_t begin, int64_t end, void* p) {
    add_ctx* x = (add_ctx*)p;
    for (int64_t i = begin * 8; i < end * 8; ++i) x->c[i] = x->a[i] + x->b[i];
}
/* c = a + b over 16 uint32, as two parallel chunks of 8 */
int32_t t_add(void* const* args, const kiln_kernel_env* env) {
    add_ctx c = {(const uint32_t*)args[0], (const uint32_t*)args[1], (uint32_t*)args[2]};
    env->parallel_for(env->pool, 2, add_task, &c);
    return 0;
}
/* y = 3 * x + 1 over 16 uint32 */
int32_t t_mix(void* const* args, const kiln_kernel_env* env) {
    const uint32_t* x = (const uint32_t*)args[0];
    uint32_t* y = (uint32_t*)args[1];
    for (int i = 0; i < 16; ++i) y[i] = 3u * x[i] + 1u;
    return 0;
}
int32_t t_fail(void* const* args, const kiln_kernel_env* env) { return 9; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static void spin(double s) { double end = now_s() + s; while (now_s() < end) {} }
/* out[0] = this thread's id, after 3 ms of work (args: in, out[1] int64) */
int32_t t_tid(void* const* args, const kiln_kernel_env* env) {
    spin(0.003);
    ((int64_t*)args[1])[0] = (int64_t)pthread_self();
    return 0;
}
static void tid_task(int64_t begin, int64_t end, void* p) {
    for (int64_t i = begin; i < end; ++i) { spin(0.0003); ((int64_t*)p)[i] = (int64_t)pthread_self(); }
}
/* out[i] = the id of the thread that ran iteration i of a 64-iteration parallel loop */
int32_t t_tid_par(void* const* args, const kiln_kernel_env* env) {
    env->parallel_for(env->pool, 64, tid_task, args[1]);
    return 0;
}
)C";

std::string kernel_lib() {
    static std::string lib = codegen::compile_c(kKernels).path;
    return lib;
}

enum Kernel { kAdd, kMix, kFail, kTid, kTidPar, kCopy };

std::vector<KernelDesc> kernel_table() {
    std::string lib = kernel_lib();
    return {{lib, "t_add", "Add"},       {lib, "t_mix", "Mix"}, {lib, "t_fail", "Fail"},
            {lib, "t_tid", "Tid"},       {lib, "t_tid_par", "TidPar"},
            {"", kAsyncCopySymbol, "Copy", true}};
}

StepDesc make_step(int kernel, std::vector<int> args, int num_inputs, double flops, std::string name) {
    StepDesc s;
    s.kernel = kernel;
    s.args = std::move(args);
    s.num_inputs = num_inputs;
    s.flops = flops;
    s.node_name = std::move(name);
    return s;
}

/// A random DAG of `n` Add/Mix steps over uint32[16] buffers (input buffer 0), with `ref`
/// holding each buffer's expected contents for input `x` computed by naive loops.
struct RandomDag {
    std::shared_ptr<Executable> exe;
    std::vector<std::vector<uint32_t>> ref;  // per buffer
};

RandomDag make_random_dag(int n, uint32_t seed, const std::vector<uint32_t>& x) {
    std::mt19937 rng(seed);
    RandomDag d;
    d.exe = std::make_shared<Executable>();
    Executable& e = *d.exe;
    e.kernels = kernel_table();
    e.planned_for_concurrency = true;  // one buffer per value: no shared memory
    e.buffers.push_back({"x", DType::kUInt32, {kLen}, BufferRole::kInput, {}});
    e.inputs = {0};
    d.ref.push_back(x);
    for (int i = 0; i < n; ++i) {
        int out = static_cast<int>(e.buffers.size());
        e.buffers.push_back({"v" + std::to_string(i), DType::kUInt32, {kLen}, BufferRole::kIntermediate, {}});
        auto pick = [&] {  // a recent value: long chains and wide levels both occur
            int lo = std::max(0, out - 40);
            return std::uniform_int_distribution<int>(lo, out - 1)(rng);
        };
        double flops = i % 3 == 0 ? 16 : 0;  // a third inline, the rest through the queue
        std::vector<uint32_t> r(kLen);
        if (rng() % 2) {
            int a = pick(), b = pick();
            e.steps.push_back(make_step(kAdd, {a, b, out}, 2, flops, "add" + std::to_string(i)));
            for (int k = 0; k < kLen; ++k) r[k] = d.ref[a][k] + d.ref[b][k];
        } else {
            int a = pick();
            e.steps.push_back(make_step(kMix, {a, out}, 1, flops, "mix" + std::to_string(i)));
            for (int k = 0; k < kLen; ++k) r[k] = 3u * d.ref[a][k] + 1u;
        }
        d.ref.push_back(std::move(r));
    }
    // Outputs: the last value and 15 random ones.
    std::vector<int> outs = {static_cast<int>(e.buffers.size()) - 1};
    for (int k = 0; k < 15; ++k) outs.push_back(std::uniform_int_distribution<int>(1, n)(rng));
    std::set<int> marked;
    for (int b : outs) {
        if (marked.insert(b).second) e.buffers[b].role = BufferRole::kOutput;
        e.outputs.push_back(b);
    }
    return d;
}

Tensor u32_tensor(const std::vector<uint32_t>& v) {
    Tensor t(DType::kUInt32, {static_cast<int64_t>(v.size())});
    std::memcpy(t.data(), v.data(), v.size() * 4);
    return t;
}

std::vector<uint32_t> u32_values(const Tensor& t) {
    std::vector<uint32_t> v(t.numel());
    std::memcpy(v.data(), t.data(), t.nbytes());
    return v;
}

std::vector<uint32_t> input_values(uint32_t seed) {
    std::vector<uint32_t> x(kLen);
    for (int k = 0; k < kLen; ++k) x[k] = seed * 2654435761u + k * 40503u;
    return x;
}

void expect_outputs(const RandomDag& d, const std::vector<Tensor>& outs, const std::string& what) {
    ASSERT_EQ(outs.size(), d.exe->outputs.size()) << what;
    for (size_t i = 0; i < outs.size(); ++i)
        ASSERT_EQ(u32_values(outs[i]), d.ref[d.exe->outputs[i]]) << what << ": output " << i;
}

TEST(DataflowExecutor, RandomDagsMatchNaiveLoopsAndSequentialBitwise) {
    ThreadPool intra(2);
    InterOpThreadPool inter(3);
    for (uint32_t seed = 1; seed <= 5; ++seed) {
        std::vector<uint32_t> x = input_values(seed);
        RandomDag d = make_random_dag(300, seed, x);
        CpuAllocator a1, a2;
        DataflowExecutor df(d.exe, &intra, &inter, &a1);
        SequentialExecutor seq(d.exe, &intra, &a2);
        std::vector<Tensor> o1, o2;
        Status s1 = df.run({u32_tensor(x)}, o1);
        ASSERT_TRUE(s1.ok()) << s1.message();
        ASSERT_TRUE(seq.run({u32_tensor(x)}, o2).ok());
        expect_outputs(d, o1, "dataflow seed " + std::to_string(seed));
        ASSERT_EQ(o1.size(), o2.size());
        for (size_t i = 0; i < o1.size(); ++i)
            EXPECT_EQ(std::memcmp(o1[i].data(), o2[i].data(), o1[i].nbytes()), 0) << "output " << i;
    }
}

// The issue's stress test: 10,000 nodes, 8 inter-op threads, 100 runs, exact results each run.
TEST(DataflowExecutor, StressTenThousandNodesEightThreadsHundredRuns) {
    ThreadPool intra(2);
    InterOpThreadPool inter(8);
    std::vector<uint32_t> x = input_values(77);
    RandomDag d = make_random_dag(10000, 77, x);
    CpuAllocator alloc;
    DataflowExecutor df(d.exe, &intra, &inter, &alloc);
    auto t0 = std::chrono::steady_clock::now();
    for (int run = 0; run < 100; ++run) {
        std::vector<Tensor> outs;
        Status st = df.run({u32_tensor(x)}, outs);
        ASSERT_TRUE(st.ok()) << "run " << run << ": " << st.message();
        expect_outputs(d, outs, "run " + std::to_string(run));
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("100 runs of 10,000 nodes on 8 inter-op threads: %.2f s\n", s);
}

TEST(DataflowExecutor, NoPoolRunsEverythingOnTheCaller) {
    std::vector<uint32_t> x = input_values(3);
    RandomDag d = make_random_dag(200, 3, x);
    CpuAllocator alloc;
    DataflowExecutor df(d.exe, nullptr, nullptr, &alloc);
    std::vector<Tensor> outs;
    ASSERT_TRUE(df.run({u32_tensor(x)}, outs).ok());
    expect_outputs(d, outs, "no pools");
}

TEST(DataflowExecutor, FailingStepStopsTheRunWithItsStatus) {
    std::vector<uint32_t> x = input_values(5);
    RandomDag d = make_random_dag(500, 5, x);
    // Step 250 fails: its outputs are never written; the run must drain and report it.
    d.exe->steps[250].kernel = kFail;
    d.exe->steps[250].node_name = "broken_node";
    ThreadPool intra(2);
    InterOpThreadPool inter(4);
    CpuAllocator alloc;
    DataflowExecutor df(d.exe, &intra, &inter, &alloc);
    for (int rep = 0; rep < 20; ++rep) {
        std::vector<Tensor> outs;
        Status st = df.run({u32_tensor(x)}, outs);
        ASSERT_FALSE(st.ok());
        EXPECT_EQ(st.kind(), ErrorKind::kInternal);
        EXPECT_NE(st.message().find("'broken_node'"), std::string::npos) << st.message();
        EXPECT_NE(st.message().find("code 9"), std::string::npos) << st.message();
    }
    // Bad inputs are refused before any step runs.
    std::vector<Tensor> outs;
    Status st = df.run({Tensor(DType::kFloat32, {kLen})}, outs);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(st.message(), "input 'x': expected u32[16], got f32[16]");
}

TEST(DataflowExecutor, TerminateFlagStopsTheRunWithCancelled) {
    std::vector<uint32_t> x = input_values(8);
    RandomDag d = make_random_dag(300, 8, x);
    ThreadPool intra(2);
    InterOpThreadPool inter(4);
    CpuAllocator alloc;
    DataflowExecutor df(d.exe, &intra, &inter, &alloc);
    SequentialExecutor seq(d.exe, &intra, &alloc);
    std::atomic<bool> stop{true};
    for (Executor* e : {static_cast<Executor*>(&df), static_cast<Executor*>(&seq)}) {
        std::vector<Tensor> outs;
        Status st = e->run({u32_tensor(x)}, outs, &stop);
        EXPECT_EQ(st.kind(), ErrorKind::kCancelled) << e->name() << ": " << st.message();
        EXPECT_NE(st.message().find("terminate"), std::string::npos) << st.message();
        // Cleared, the same executor runs to the right outputs.
        stop = false;
        outs.clear();
        ASSERT_TRUE(e->run({u32_tensor(x)}, outs, &stop).ok());
        expect_outputs(d, outs, e->name());
        stop = true;
    }
}

TEST(DataflowExecutor, RefusesAnExecutableNotPlannedForConcurrency) {
    std::vector<uint32_t> x = input_values(1);
    RandomDag d = make_random_dag(10, 1, x);
    d.exe->planned_for_concurrency = false;
    CpuAllocator alloc;
    DataflowExecutor df(d.exe, nullptr, nullptr, &alloc);
    std::vector<Tensor> outs;
    Status st = df.run({u32_tensor(x)}, outs);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(st.message().find("plan_for_concurrency"), std::string::npos) << st.message();
}

// Async copies (input -> output, and an intermediate -> output) overlap other steps and give
// the same bytes under both executors.
TEST(DataflowExecutor, AsyncCopyStepsUnderBothExecutors) {
    std::vector<uint32_t> x = input_values(9);
    RandomDag d = make_random_dag(100, 9, x);
    Executable& e = *d.exe;
    for (int src : {0, 50}) {
        int out = static_cast<int>(e.buffers.size());
        e.buffers.push_back({"copy" + std::to_string(src), DType::kUInt32, {kLen}, BufferRole::kOutput, {}});
        e.steps.insert(e.steps.begin() + 60, make_step(kCopy, {src, out}, 1, kLen, "copy"));
        e.outputs.push_back(out);
        d.ref.push_back(d.ref[src]);
    }
    ThreadPool intra(2);
    InterOpThreadPool inter(2);
    CpuAllocator a1, a2;
    DataflowExecutor df(d.exe, &intra, &inter, &a1);
    SequentialExecutor seq(d.exe, &intra, &a2);
    for (int rep = 0; rep < 10; ++rep) {
        std::vector<Tensor> o1, o2;
        ASSERT_TRUE(df.run({u32_tensor(x)}, o1).ok());
        ASSERT_TRUE(seq.run({u32_tensor(x)}, o2).ok());
        expect_outputs(d, o1, "dataflow");
        expect_outputs(d, o2, "sequential");
    }
}

TEST(AsyncKernel, CopyReportsCompletionOnAnotherThread) {
    AsyncKernel* k = find_async_kernel(kAsyncCopySymbol);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(find_async_kernel("no_such_kernel"), nullptr);
    std::vector<float> src(1 << 16, 2.5f), dst(1 << 16, 0.0f);
    Status st = run_async_kernel_and_wait(*k, {src.data(), dst.data()}, {src.size() * 4, dst.size() * 4});
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(dst, src);
    st = run_async_kernel_and_wait(*k, {src.data(), dst.data()}, {8, 4});
    EXPECT_EQ(st.kind(), ErrorKind::kInternal);
}

/// `n` independent Tid (or TidPar) steps, each writing thread ids to its own output.
std::shared_ptr<Executable> make_tid_exe(int n, bool parallel_loop) {
    auto exe = std::make_shared<Executable>();
    exe->kernels = kernel_table();
    exe->planned_for_concurrency = true;
    exe->buffers.push_back({"x", DType::kInt64, {1}, BufferRole::kInput, {}});
    exe->inputs = {0};
    for (int i = 0; i < n; ++i) {
        int out = static_cast<int>(exe->buffers.size());
        exe->buffers.push_back({"t" + std::to_string(i), DType::kInt64, {parallel_loop ? 64 : 1}, BufferRole::kOutput, {}});
        exe->steps.push_back(make_step(parallel_loop ? kTidPar : kTid, {0, out}, 1, 1e6, "tid" + std::to_string(i)));
        exe->outputs.push_back(out);
    }
    return exe;
}

size_t distinct_threads(const std::vector<Tensor>& outs) {
    std::set<int64_t> ids;
    for (const Tensor& t : outs)
        for (int64_t i = 0; i < t.numel(); ++i) ids.insert(static_cast<const int64_t*>(t.data())[i]);
    return ids.size();
}

TEST(ThreadOptions, InterOpThreadsAreHonoured) {
    Tensor x(DType::kInt64, {1});
    for (int inter_threads : {1, 3}) {
        ThreadPool intra(1);
        InterOpThreadPool inter(inter_threads);
        CpuAllocator alloc;
        DataflowExecutor df(make_tid_exe(12, false), &intra, &inter, &alloc);
        std::vector<Tensor> outs;
        ASSERT_TRUE(df.run({x}, outs).ok());
        size_t used = distinct_threads(outs);
        EXPECT_LE(used, static_cast<size_t>(inter_threads)) << inter_threads;
        if (inter_threads > 1) EXPECT_GE(used, 2u) << "12 x 3 ms of independent work ran on one thread";
    }
}

TEST(ThreadOptions, IntraOpThreadsAreHonoured) {
    Tensor x(DType::kInt64, {1});
    for (int intra_threads : {1, 3}) {
        ThreadPool intra(intra_threads);
        CpuAllocator alloc;
        SequentialExecutor seq(make_tid_exe(2, true), &intra, &alloc);
        std::vector<Tensor> outs;
        ASSERT_TRUE(seq.run({x}, outs).ok());
        size_t used = distinct_threads(outs);
        EXPECT_LE(used, static_cast<size_t>(intra_threads));
        if (intra_threads > 1) EXPECT_GE(used, 2u);
    }
    // Both pools: kernels run on at most 2 inter-op threads, their loops get help from the one
    // intra-op worker: 2 + (2 - 1) threads at most.
    ThreadPool intra(2);
    InterOpThreadPool inter(2);
    CpuAllocator alloc;
    DataflowExecutor df(make_tid_exe(6, true), &intra, &inter, &alloc);
    std::vector<Tensor> outs;
    ASSERT_TRUE(df.run({x}, outs).ok());
    EXPECT_LE(distinct_threads(outs), 3u);
}

TEST(DataflowExecutor, ProfilerRecordsEveryStepOnItsThread) {
    Tensor x(DType::kInt64, {1});
    ThreadPool intra(1);
    InterOpThreadPool inter(2);
    CpuAllocator alloc;
    auto exe = make_tid_exe(4, false);
    DataflowExecutor df(exe, &intra, &inter, &alloc);
    Profiler prof;
    df.set_profiler(&prof);
    std::vector<Tensor> outs;
    ASSERT_TRUE(df.run({x}, outs).ok());
    ASSERT_TRUE(df.run({x}, outs).ok());
    EXPECT_EQ(prof.num_runs(), 2u);
    std::string j = prof.chrome_trace_json();
    size_t events = 0;
    for (size_t p = j.find("\"ph\":\"X\""); p != std::string::npos; p = j.find("\"ph\":\"X\"", p + 1)) ++events;
    EXPECT_EQ(events, 8u);
    EXPECT_NE(j.find("\"node\":\"tid3\""), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
