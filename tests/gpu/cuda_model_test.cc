// On a GPU (skipped cleanly without one): every default-schedule kernel against the CPU kernel
// of the same graph on random inputs (FP32: |gpu - cpu| <= 1e-5 * max(1, |cpu|)), cuBLAS sgemm
// against a double-precision reference, the session budget's OutOfMemory, and whole models
// (tests' MLP and tiny BERT, when KILN_GPU_MODELS names their directory) against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "compiler/compile.h"
#include "compiler/cuda_compile.h"
#include "frontend/onnx/importer.h"
#include "gpu_reference.h"
#include "gpu_test_util.h"
#include "ir/parser.h"
#include "runtime/cuda/cublas_gemm.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_runner.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using runtime::cuda::CudaDevice;
using runtime::cuda::CudaRunner;
using gpu_testing::max_rel_error;
using gpu_testing::max_scaled_error;
using gpu_testing::random_inputs;
using gpu_testing::run_cpu;

std::vector<Tensor> run_gpu(ir::Graph g, CudaDevice& dev, const std::vector<Tensor>& inputs, bool cublas,
                            std::string* report = nullptr) {
    compiler::CudaCompiledModel cm =
        compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev.arch(), .use_cublas = cublas, .use_cudnn = cublas});
    CudaRunner runner(cm.program, dev, 0);
    std::vector<Tensor> outs;
    Status s = runner.run(inputs, outs);
    EXPECT_TRUE(s.ok()) << s.message();
    if (report) *report = runner.resource_report();
    return outs;
}

TEST(CudaKernels, EveryDefaultScheduleMatchesTheCpuKernel) {
    KILN_REQUIRE_GPU(dev);
    for (const gpu_testing::Case& c : gpu_testing::schedule_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        std::vector<Tensor> in = random_inputs(g, 7);
        std::vector<Tensor> cpu = run_cpu(ir::parse_graph(c.graph), in);
        for (bool cublas : {false, true}) {
            std::string report;
            std::vector<Tensor> gpu = run_gpu(ir::parse_graph(c.graph), *dev, in, cublas, &report);
            const double err = max_rel_error(gpu, cpu);
            std::printf("%-18s %-9s max rel error %.3g\n%s", c.name, cublas ? "cuBLAS" : "generated", err, report.c_str());
            EXPECT_LE(err, 1e-5) << (cublas ? "with cuBLAS" : "generated");
        }
        ir::Graph gh = ir::parse_graph(c.graph);  // FP16, cuBLAS's GemmEx where it takes the product
        compiler::CudaCompiledModel cm = compiler::compile_cuda(gh, {.arch = dev->arch(), .math = compiler::GpuMath::kFp16});
        CudaRunner runner(cm.program, *dev, 0);
        std::vector<Tensor> half;
        Status s = runner.run(in, half);
        ASSERT_TRUE(s.ok()) << s.message();
        const double err = max_scaled_error(half, cpu);
        std::printf("%-18s FP16      max scaled error %.3g\n", c.name, err);
        EXPECT_LE(err, 1e-2);
    }
}

TEST(CudaKernels, CudnnConvolutionsMatchTheCpu) {
    KILN_REQUIRE_GPU(dev);
    std::string why;
    ASSERT_NE(runtime::cuda::cudnn_api(&why), nullptr) << why;
    for (const gpu_testing::ConvCase& c : gpu_testing::conv_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        std::vector<Tensor> in = random_inputs(g, 9);
        std::vector<Tensor> cpu = run_cpu(ir::parse_graph(c.graph), in);
        for (compiler::GpuMath math : {compiler::GpuMath::kFp32, compiler::GpuMath::kTf32, compiler::GpuMath::kFp16}) {
            const char* label = math == compiler::GpuMath::kFp32 ? "FP32" : math == compiler::GpuMath::kTf32 ? "TF32" : "FP16";
            ir::Graph gg = ir::parse_graph(c.graph);
            compiler::CudaCompiledModel cm =
                compiler::compile_cuda(gg, {.dims = {}, .opt_level = 3, .arch = dev->arch(), .math = math});
            ASSERT_EQ(cm.cudnn_steps, 1) << label;
            CudaRunner runner(cm.program, *dev, 0);
            std::vector<Tensor> gpu, replayed;
            Status s = runner.run(in, gpu);
            ASSERT_TRUE(s.ok()) << label << ": " << s.message();
            runner.set_use_graph(true);  // cuDNN's launches captured with the generated ones
            s = runner.run(in, replayed);
            ASSERT_TRUE(s.ok()) << label << ": " << s.message();
            EXPECT_EQ(max_rel_error(replayed, gpu), 0.0) << label;
            const double rel = max_rel_error(gpu, cpu), scaled = max_scaled_error(gpu, cpu);
            std::printf("cuDNN %-18s %s max rel error %.3g, scaled %.3g\n", c.name, label, rel, scaled);
            if (math == compiler::GpuMath::kFp32)
                EXPECT_LE(rel, 1e-5);
            else if (math == compiler::GpuMath::kTf32)
                EXPECT_LE(scaled, 5e-4);  // operands rounded to TF32's 10 mantissa bits
            else
                EXPECT_LE(scaled, 1e-2);  // FP16 data, FP32 accumulation
        }
    }
}

TEST(CudaKernels, CublasSgemmMatchesDoubleReference) {
    KILN_REQUIRE_GPU(dev);
    const int m = 67, n = 129, k = 300;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    runtime::cuda::CudaStream stream(*dev);
    runtime::cuda::CublasGemm gemm(*dev);
    auto alloc = runtime::cuda::make_cuda_session_allocator(*dev, 0);
    void* da = alloc->allocate(a.size() * 4, "a");
    void* db = alloc->allocate(b.size() * 4, "b");
    void* dc = alloc->allocate(c.size() * 4, "c");
    dev->copy(da, a.data(), a.size() * 4);
    dev->copy(db, b.data(), b.size() * 4);
    ASSERT_TRUE(gemm.sgemm_row_major(stream, m, n, k, static_cast<float*>(da), static_cast<float*>(db), static_cast<float*>(dc)).ok());
    ASSERT_TRUE(stream.synchronize().ok());
    dev->copy(c.data(), dc, c.size() * 4);
    double worst = 0;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            double ref = 0;
            for (int p = 0; p < k; ++p) ref += static_cast<double>(a[i * k + p]) * b[p * n + j];
            worst = std::max(worst, std::abs(c[i * n + j] - ref) / std::max(1.0, std::abs(ref)));
        }
    std::printf("cuBLAS sgemm %dx%dx%d max rel error %.3g\n", m, n, k, worst);
    EXPECT_LE(worst, 1e-5);
    for (void* p : {da, db, dc}) alloc->deallocate(p, 0);
}

TEST(CudaRuntime, BudgetExhaustionNamesTheBuffer) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[3].graph);
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev->arch(), .use_cublas = false, .use_cudnn = false});
    try {
        CudaRunner runner(cm.program, *dev, 4096);  // the inputs alone need 80 KB
        FAIL() << "expected kOutOfMemory";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory) << e.what();
        EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
    }
    CudaRunner ok(cm.program, *dev, 1 << 20);  // the process and the device stay usable
    std::vector<Tensor> outs;
    EXPECT_TRUE(ok.run(random_inputs(g, 1), outs).ok());
}

TEST(CudaRuntime, GraphReplayGivesTheSameOutputs) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[3].graph);  // cuBLAS + epilogue
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev->arch()});
    CudaRunner runner(cm.program, *dev, 0);
    std::vector<Tensor> in = random_inputs(g, 4), plain, replayed;
    ASSERT_TRUE(runner.run(in, plain).ok());
    runner.set_use_graph(true);
    for (int r = 0; r < 3; ++r) {  // capture, then replays
        Status s = runner.run(in, replayed);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(max_rel_error(replayed, plain), 0.0) << "run " << r;
    }
}

TEST(CudaRuntime, ProfileTimesEveryStep) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[3].graph);  // cuBLAS + epilogue
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev->arch()});
    CudaRunner runner(cm.program, *dev, 0);
    std::vector<std::pair<std::string, float>> steps;
    Status s = runner.profile_steps(random_inputs(g, 2), steps);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0].first.rfind("cuBLAS gemm", 0), 0u) << steps[0].first;
    EXPECT_NE(steps[1].first.find("Add+Relu"), std::string::npos) << steps[1].first;
    for (const auto& [what, ms] : steps) EXPECT_GE(ms, 0.f) << what;
}

/// Two runs (the second on buffers the first left) within 1e-5 of the CPU's outputs.
void expect_runs_match(CudaRunner& runner, const std::vector<Tensor>& in, const std::vector<Tensor>& cpu) {
    std::vector<Tensor> gpu;
    for (int r = 0; r < 2; ++r) {
        Status s = runner.run(in, gpu);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_LE(max_rel_error(gpu, cpu), 1e-5);
    }
}

TEST(CudaRuntime, HostPlacedStepMatchesTheCpu) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::placement_case());
    std::vector<Tensor> in = random_inputs(g, 8);
    std::vector<Tensor> cpu = run_cpu(ir::parse_graph(gpu_testing::placement_case()), in);
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev->arch()});
    ASSERT_EQ(cm.host_steps, 1);
    CudaRunner runner(cm.program, *dev, 0);
    expect_runs_match(runner, in, cpu);
    std::vector<Tensor> gpu;
    runner.set_use_graph(true);  // a host step cannot be captured: a clear error, no crash
    EXPECT_EQ(runner.run(in, gpu).kind(), ErrorKind::kUnsupported);
}

TEST(CudaRuntime, UnitPinnedToTheCpuMatchesTheCpu) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::pinned_case());
    std::vector<Tensor> in = random_inputs(g, 8);
    std::vector<Tensor> cpu = run_cpu(ir::parse_graph(gpu_testing::pinned_case()), in);
    compiler::CudaCompileOptions o{.dims = {}, .opt_level = 3, .arch = dev->arch()};
    o.pins = {{"m", pass::Device::kCpu}};
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, o);
    ASSERT_EQ(cm.host_steps, 1);
    CudaRunner runner(cm.program, *dev, 0);
    expect_runs_match(runner, in, cpu);
}

// REEF on the GPU (CudaCompileOptions::preemptible): with the stop flag set, a best-effort run
// on a low-priority stream computes nothing and waits; an RT run on a high-priority stream goes
// meanwhile; cleared, the BE run resumes from its first cut launch and answers bit for bit what
// an uncut run answers.
TEST(CudaRuntime, PreemptedRunResumesWithTheSameOutputs) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::pinned_case());
    std::vector<Tensor> in = random_inputs(g, 8);
    compiler::CudaCompileOptions o{.dims = {}, .opt_level = 3, .arch = dev->arch(), .use_cublas = false, .use_cudnn = false};
    o.preemptible = true;
    compiler::CudaCompiledModel be = compiler::compile_cuda(g, o);
    CudaRunner be_runner(be.program, *dev, 0, runtime::cuda::CudaStream::Priority::kLow);
    ASSERT_TRUE(be_runner.preemptible());
    std::vector<Tensor> uncut;
    ASSERT_TRUE(be_runner.run(in, uncut).ok());
    EXPECT_EQ(be_runner.resumes(), 0u);
    EXPECT_LE(max_rel_error(uncut, run_cpu(ir::parse_graph(gpu_testing::pinned_case()), in)), 1e-5);

    be_runner.request_stop();  // real-time work arrives before the BE run starts
    std::vector<Tensor> cut;
    Status cut_status;
    std::thread be_thread([&] { cut_status = be_runner.run(in, cut); });
    ir::Graph rt_g = ir::parse_graph(gpu_testing::schedule_cases()[0].graph);
    compiler::CudaCompiledModel rt = compiler::compile_cuda(rt_g, {.dims = {}, .opt_level = 3, .arch = dev->arch()});
    CudaRunner rt_runner(rt.program, *dev, 0, runtime::cuda::CudaStream::Priority::kHigh);
    std::vector<Tensor> rt_in = random_inputs(rt_g, 3), rt_out;
    EXPECT_TRUE(rt_runner.run(rt_in, rt_out).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(cut.empty()) << "the stopped BE run finished before clear_stop()";
    be_runner.clear_stop();
    be_thread.join();
    ASSERT_TRUE(cut_status.ok()) << cut_status.message();
    EXPECT_EQ(be_runner.resumes(), 1u);
    ASSERT_EQ(cut.size(), uncut.size());
    for (size_t i = 0; i < cut.size(); ++i) EXPECT_EQ(std::memcmp(cut[i].data(), uncut[i].data(), cut[i].nbytes()), 0);
    be_runner.set_use_graph(true);
    EXPECT_EQ(be_runner.run(in, cut).kind(), ErrorKind::kUnsupported);
}

TEST(CudaRuntime, WrongInputShapeIsAnError) {
    KILN_REQUIRE_GPU(dev);
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[1].graph);
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = dev->arch(), .use_cublas = false, .use_cudnn = false});
    CudaRunner runner(cm.program, *dev, 0);
    std::vector<Tensor> outs;
    Status s = runner.run({Tensor(DType::kFloat32, {8, 76})}, outs);
    EXPECT_EQ(s.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.message();
}

TEST(CudaModels, TestModelsMatchTheCpu) {
    KILN_REQUIRE_GPU(dev);
    const char* dir = std::getenv("KILN_GPU_MODELS");
    if (!dir) GTEST_SKIP() << "KILN_GPU_MODELS (a directory of mlp.onnx, bert_tiny.onnx ...) is not set";
    int ran = 0;
    for (const char* name : {"mlp", "bert_tiny", "small_cnn", "resnet_block", "gpu_mlp", "gpu_encoder"}) {
        const std::string path = std::string(dir) + "/" + name + ".onnx";
        if (!std::filesystem::exists(path)) continue;
        SCOPED_TRACE(path);
        ir::Graph g = frontend::import_onnx_file(path);
        std::vector<Tensor> in = random_inputs(g, 11);
        std::vector<Tensor> cpu = run_cpu(frontend::import_onnx_file(path), in);
        for (bool cublas : {false, true}) {
            std::vector<Tensor> gpu = run_gpu(frontend::import_onnx_file(path), *dev, in, cublas);
            const double err = max_rel_error(gpu, cpu);
            std::printf("model %-12s %-16s max rel error vs CPU %.3g\n", name, cublas ? "cuBLAS+cuDNN" : "generated", err);
            EXPECT_LE(err, 1e-4) << (cublas ? "with cuBLAS" : "generated");  // many kernels, each within 1e-5
        }
        ir::Graph gh = frontend::import_onnx_file(path);
        compiler::CudaCompiledModel cm = compiler::compile_cuda(gh, {.arch = dev->arch(), .math = compiler::GpuMath::kFp16});
        CudaRunner runner(cm.program, *dev, 0);
        std::vector<Tensor> half;
        Status s = runner.run(in, half);
        ASSERT_TRUE(s.ok()) << s.message();
        const double herr = max_scaled_error(half, cpu);
        std::printf("model %-12s %-16s max scaled error vs CPU %.3g\n", name, "FP16", herr);
        EXPECT_LE(herr, 2e-2);  // several layers, each rounding to FP16
        ++ran;
    }
    EXPECT_GT(ran, 0) << "no model found in " << dir;
}

}  // namespace
}  // namespace kiln
