// GPU code generation without a GPU: every default GPU schedule's kernel is emitted as CUDA C,
// compiled by NVRTC for sm_90 and its cubin's registers and shared memory read (what CI checks;
// NVRTC is part of the toolkit installed on the development and CI machines). Registers as the
// driver sees them (cuFuncGetAttribute) need a GPU: cuda_model_test.cc prints those there.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "codegen/cuda_emitter.h"
#include "codegen/nvrtc_compile.h"
#include "compiler/cuda_compile.h"
#include "compiler/cuda_conv_match.h"
#include "compiler/cuda_lower.h"
#include "frontend/onnx/importer.h"
#include "gpu_reference.h"
#include "gpu_test_util.h"
#include "ir/parser.h"
#include "runtime/cuda/cuda_api.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "tir/lower.h"

namespace kiln {
namespace {

TEST(CudaCodegen, NvrtcIsFound) {
    const std::string d = codegen::nvrtc_description();
    std::printf("%s\n", d.c_str());
    EXPECT_EQ(d.rfind("NVRTC ", 0), 0u) << d;  // installed with the CUDA toolkit: must load
}

TEST(CudaCodegen, EveryDefaultScheduleCompilesForSm90) {
    for (const gpu_testing::Case& c : gpu_testing::schedule_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false});
        ASSERT_EQ(m.program->arch, 90);
        ASSERT_GE(m.kernels, 1);
        for (const runtime::cuda::CudaKernelDesc& k : m.program->kernels) {
            std::vector<codegen::KernelResources> res = codegen::cubin_resources(k.cubin);
            ASSERT_EQ(res.size(), k.entries.size()) << k.description;
            for (const codegen::KernelResources& r : res) {
                std::printf("%-18s %-28s %-22s %3d registers %6zu B shared\n", c.name, k.description.c_str(),
                            r.entry.c_str(), r.registers, r.shared_bytes);
                EXPECT_GT(r.registers, 0) << r.entry;
                EXPECT_LE(r.registers, 255) << r.entry;
            }
        }
    }
}

TEST(CudaCodegen, HalfPrecisionKernelsCompileForSm90) {
    // FP16 storage: the prelude's conversions are the GPU's cvt instructions (inline PTX, which
    // only NVRTC and ptxas check: the emulation compiles the software versions).
    for (const gpu_testing::Case& c : gpu_testing::schedule_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        compiler::CudaCompiledModel m = compiler::compile_cuda(
            g, {.arch = 90, .use_cublas = false, .use_cudnn = false, .math = compiler::GpuMath::kFp16});
        ASSERT_GE(m.kernels, 1);
        EXPECT_NE(m.kernel_sources[0].find("cvt.rn.f16.f32"), std::string::npos);
        for (const runtime::cuda::CudaKernelDesc& k : m.program->kernels) EXPECT_FALSE(k.cubin.empty()) << k.description;
    }
}

TEST(CudaCodegen, TestModelsCompileForSm90) {
    // The models of tests/models (scripts/make_models.py; the make_test_models fixture).
    int found = 0;
    // gpu_resnet50 where KILN_GPU_MODELS holds it (scripts/gpu_models.py).
    for (const char* name : {"mlp", "bert_tiny", "small_cnn", "resnet_block", "gpu_resnet50"}) {
        const std::string path = gpu_testing::test_model_path(name);
        if (!std::filesystem::exists(path)) continue;
        ++found;
        SCOPED_TRACE(path);
        ir::Graph g = frontend::import_onnx_file(path);
        std::map<std::string, int64_t> dims;
        for (const ir::Value* in : g.inputs())
            for (const ir::Dim& d : in->type().shape)
                if (!d.is_static()) dims[d.symbol] = 1;
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.dims = dims, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false});
        size_t planned = 0;  // the intermediates the device arena holds (compile_cuda verified the plan)
        for (const runtime::BufferDesc& b : m.program->buffers)
            if (b.arena_offset >= 0) planned += b.nbytes();
        std::printf("%s: %d CUDA kernels, %zu steps, %d NVRTC runs, intermediates %zu bytes in a %zu-byte arena\n", name,
                    m.kernels, m.program->steps.size(), m.compiled, planned, m.program->arena_bytes);
        EXPECT_GT(m.program->steps.size(), 1u);
        if (std::string(name) != "mlp") EXPECT_LT(m.program->arena_bytes, planned);  // dead buffers' bytes reused
        ir::Graph g2 = frontend::import_onnx_file(path);
        compiler::CudaCompiledModel v = compiler::compile_cuda(g2, {.dims = dims, .opt_level = 3, .arch = 90, .use_cublas = true, .use_cudnn = true});
        std::printf("%s with cuBLAS and cuDNN: %d CUDA kernels, %zu steps, %d on cuBLAS, %d on cuDNN\n", name, v.kernels,
                    v.program->steps.size(), v.cublas_steps, v.cudnn_steps);
    }
    if (found == 0) GTEST_SKIP() << "no test model generated (" << gpu_testing::test_model_path("mlp") << ")";
}

TEST(CudaCodegen, CublasTakesTheProductAndLeavesTheEpilogue) {
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[3].graph);  // MatMul+Add+Relu
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = true, .use_cudnn = true});
    if (m.cublas_steps == 0) GTEST_SKIP() << "cuBLAS does not load here";
    ASSERT_EQ(m.program->steps.size(), 2u);
    const runtime::cuda::CudaStepDesc& mm = m.program->steps[0];
    EXPECT_EQ(mm.kernel, -1);
    EXPECT_EQ(mm.gemm.m, 33);
    EXPECT_EQ(mm.gemm.n, 70);
    EXPECT_EQ(mm.gemm.k, 200);
    EXPECT_EQ(m.program->kernels.at(m.program->steps[1].kernel).description, "Add+Relu");
}

/// The conv step of a program compiled with cuDNN (nullptr when it has none).
const runtime::cuda::CudaStepDesc* conv_step(const compiler::CudaCompiledModel& m) {
    for (const runtime::cuda::CudaStepDesc& s : m.program->steps)
        if (s.is_conv) return &s;
    return nullptr;
}

TEST(CudaCodegen, CudnnTakesConvolutionsAndLeavesTheEpilogue) {
    if (!runtime::cuda::cudnn_api(nullptr)) GTEST_SKIP() << "cuDNN does not load here";
    for (const gpu_testing::ConvCase& c : gpu_testing::conv_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        const bool epilogue = g.num_nodes() > 1 || g.nodes()[0]->num_inputs() > 2;  // bias, ReLU or Add after
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = 90});
        EXPECT_EQ(m.cudnn_steps, 1);
        const runtime::cuda::CudaStepDesc* conv = conv_step(m);
        ASSERT_NE(conv, nullptr);
        EXPECT_EQ(conv->args.size(), 3u);  // X, W, Y: the bias went to the epilogue
        EXPECT_EQ(static_cast<double>(conv->conv.c) / conv->conv.group * conv->conv.kh * conv->conv.kw, c.reduction);
        EXPECT_EQ(m.program->steps.size(), epilogue ? 2u : 1u);
        EXPECT_EQ(m.kernels, epilogue ? 1 : 0);
    }
    const std::vector<gpu_testing::ConvCase>& cases = gpu_testing::conv_cases();
    ir::Graph stem = ir::parse_graph(cases[1].graph);
    const runtime::cuda::CudaConvDesc s = conv_step(compiler::compile_cuda(stem, {.arch = 90}))->conv;
    EXPECT_EQ(std::vector<int>({s.n, s.c, s.h, s.w, s.k, s.kh, s.kw, s.oh, s.ow}),
              std::vector<int>({1, 3, 31, 29, 8, 7, 7, 16, 15}));
    EXPECT_EQ(std::vector<int>({s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.dil_h, s.group}),
              std::vector<int>({3, 3, 2, 2, 1, 1}));
    ir::Graph dw = ir::parse_graph(cases[2].graph);
    EXPECT_EQ(conv_step(compiler::compile_cuda(dw, {.arch = 90}))->conv.group, 12);
    ir::Graph one_d = ir::parse_graph(cases[5].graph);  // [2,5,40] as [2,5,1,40]
    const runtime::cuda::CudaConvDesc d = conv_step(compiler::compile_cuda(one_d, {.arch = 90}))->conv;
    EXPECT_EQ(std::vector<int>({d.h, d.w, d.kh, d.kw, d.oh, d.ow, d.pad_h, d.pad_w, d.stride_h, d.stride_w}),
              std::vector<int>({1, 40, 1, 5, 1, 20, 0, 2, 1, 2}));
    ir::Graph asym = ir::parse_graph(gpu_testing::asymmetric_pad_conv_case());
    compiler::CudaCompiledModel a = compiler::compile_cuda(asym, {.arch = 90});
    EXPECT_EQ(a.cudnn_steps, 0);  // cuDNN has one pad per axis: generated
    EXPECT_EQ(a.kernels, 1);
}

TEST(CudaCodegen, MovingTheBiasOutOfTheConvKeepsItsValues) {
    // split_cudnn_convs rewrites Conv(x, w, b) into Conv(x, w) + b[C,1,1]: the CPU runs both
    // graphs (its own kernels, checked against ONNX Runtime elsewhere) to the same outputs.
    for (const gpu_testing::ConvCase& c : gpu_testing::conv_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        std::vector<Tensor> in = gpu_testing::random_inputs(g, 5);
        std::vector<Tensor> before = gpu_testing::run_cpu(ir::parse_graph(c.graph), in);
        ir::Graph split = ir::parse_graph(c.graph);
        EXPECT_EQ(compiler::split_cudnn_convs(split), 1);
        EXPECT_EQ(split.outputs()[0]->name(), g.outputs()[0]->name());
        std::vector<Tensor> after = gpu_testing::run_cpu(std::move(split), in);
        EXPECT_LE(gpu_testing::max_rel_error(after, before), 1e-6);
    }
}

/// compile_cuda of the graph `text` fails with `kind`, its message naming `needle`.
void expect_compile_error(const char* text, const compiler::CudaCompileOptions& o, ErrorKind kind, const std::string& needle) {
    ir::Graph g = ir::parse_graph(text);
    try {
        compiler::compile_cuda(g, o);
        ADD_FAILURE() << "expected " << error_kind_name(kind) << " naming " << needle;
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(CudaCodegen, OpsWithoutCudaKernelsArePlacedOnTheHost) {
    ir::Graph g = ir::parse_graph(gpu_testing::placement_case());
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false});
    EXPECT_EQ(m.host_steps, 1);
    int host = 0;
    for (const runtime::cuda::CudaStepDesc& s : m.program->steps) host += !s.host_extern.empty();
    EXPECT_EQ(host, 1);
    EXPECT_GE(m.program->steps.size(), 3u);  // Neg on the GPU, CumSum on the host, Relu on the GPU
    expect_compile_error(gpu_testing::placement_case(),
                         {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false, .cpu_fallback = false},
                         ErrorKind::kUnsupported, "CumSum");
}

// The placement the GPU compile makes, as `kiln inspect --place cuda` prints it: CumSum on the
// host by rule, a copy at each boundary, pins honoured, bad pins clear errors.
TEST(CudaCodegen, PlacementReportShowsRulesPinsAndCopies) {
    ir::Graph g = ir::parse_graph(gpu_testing::placement_case());
    const std::string report = compiler::cuda_placement_report(g, {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false});
    EXPECT_NE(report.find("cpu   no kernel          node"), std::string::npos) << report;
    EXPECT_NE(report.find("(CumSum)"), std::string::npos) << report;
    size_t copies = 0;
    for (size_t at = report.find("= KilnDeviceCopy("); at != std::string::npos; at = report.find("= KilnDeviceCopy(", at + 1)) ++copies;
    EXPECT_EQ(copies, 4u) << report;  // x in, Neg's result out, CumSum's back in, y out
    ir::Graph pinned = ir::parse_graph(gpu_testing::pinned_case());
    compiler::CudaCompileOptions o{.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false};
    o.pins = {{"m", pass::Device::kCpu}};
    EXPECT_NE(compiler::cuda_placement_report(pinned, o).find("cpu   pinned"), std::string::npos);
    o.pins = {{"matmul", pass::Device::kCpu}};
    expect_compile_error(gpu_testing::pinned_case(), o, ErrorKind::kInvalidArgument, "'matmul=cpu'");
    o.pins = {{"m", pass::Device::kCpu}};
    o.cpu_fallback = false;
    expect_compile_error(gpu_testing::pinned_case(), o, ErrorKind::kUnsupported, "pinned");
}

TEST(CudaCodegen, BindLaunchesTheBoundExtents) {
    te::Tensor a = te::placeholder({1024}, DType::kFloat32, "a");
    te::Tensor b = te::compute({1024}, [&](const std::vector<te::Var>& i) { return te::read(a, i) * te::read(a, i); }, "b");
    te::Schedule s = te::create_schedule({b});
    auto [bo, bi] = s[b].split(s[b].axis(0), 128);
    s[b].bind(bo, te::LoopKind::kBlockIdxX);
    s[b].bind(bi, te::LoopKind::kThreadIdxX);
    codegen::CudaKernel k = codegen::emit_cuda(tir::lower(s, {a, b}, "sq"));
    ASSERT_EQ(k.launches.size(), 1u);
    EXPECT_EQ(k.launches[0].grid, 8);  // 1024 / 128
    EXPECT_EQ(k.launches[0].block, 128);
    EXPECT_NE(k.source.find("blockIdx.x"), std::string::npos);
    EXPECT_NO_THROW(codegen::compile_cuda(k.source, 90));
}

TEST(CudaCodegen, BindRefusesReduceAxes) {
    te::Tensor a = te::placeholder({4, 8}, DType::kFloat32, "a");
    te::IterVar r = te::reduce_axis(8, "r");
    te::Tensor s = te::compute({4}, [&](const std::vector<te::Var>& i) { return te::sum(te::read(a, {te::Expr(i[0]), te::Expr(r->var)}), {r}); }, "s");
    te::Schedule sch = te::create_schedule({s});
    EXPECT_THROW(sch[s].bind(sch[s].reduce_axis(0), te::LoopKind::kThreadIdxX), Error);
}

TEST(CudaCodegen, SoftmaxStagesBecomeSeparateLaunches) {
    ir::Graph g = ir::parse_graph(gpu_testing::schedule_cases()[1].graph);  // lowered, not the row kernel
    compiler::CudaCompiledModel m = compiler::compile_cuda(
        g, {.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false, .row_kernels = false});
    ASSERT_EQ(m.program->kernels.size(), 1u);
    const runtime::cuda::CudaKernelDesc& k = m.program->kernels[0];
    EXPECT_GE(k.entries.size(), 2u);  // a reduction stage, then the stage that reads it
    EXPECT_GE(k.scratch_bytes.size(), 1u);  // the reduction's row values live between launches
    EXPECT_LT(k.scratch_bytes.size(), k.entries.size());
}

TEST(CudaCodegen, LayerNormAndSoftmaxAreOneRowKernelEach) {
    for (int i : {1, 2}) {  // softmax [8,77], layer_norm [6,130]
        const gpu_testing::Case& c = gpu_testing::schedule_cases()[i];
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.arch = 90});
        EXPECT_EQ(m.row_kernel_steps, 1);
        ASSERT_EQ(m.program->steps.size(), 1u);
        const runtime::cuda::CudaKernelDesc& k = m.program->kernels.at(m.program->steps[0].kernel);
        ASSERT_EQ(k.entries.size(), 1u);  // one launch: a block per row
        EXPECT_EQ(k.entries[0].grid, i == 1 ? 8u : 6u);
        EXPECT_EQ(k.entries[0].block, i == 1 ? 96u : 160u);  // the row in whole warps
        EXPECT_EQ(m.program->steps[0].args.size(), i == 1 ? 2u : 4u);  // X (Scale, B), Y
    }
    const char* log_softmax = R"(
graph g(%x: f32[4,50]) {
  %y = LogSoftmax(%x) {axis=1} : f32[4,50]
  return %y
})";
    ir::Graph g = ir::parse_graph(log_softmax);
    EXPECT_EQ(compiler::compile_cuda(g, {.arch = 90}).row_kernel_steps, 0);  // lowered
}

TEST(CudaCodegen, LongRowReductionsTakeAWarpPerRow) {
    // Layer norm over rows of 1000: its mean and variance stages (16 interleaved partial sums per
    // row, 63 terms each: 640 outputs) become one warp per output, 8 per block of 256; the
    // normalizing stage stays one thread per element.
    const char* text = R"(
graph g(%x: f32[40,1000], %w: f32[1000], %b: f32[1000]) {
  %y = LayerNormalization(%x, %w, %b) {axis=-1} : f32[40,1000]
  return %y
})";
    ir::Graph g = ir::parse_graph(text);
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, {.arch = 90});  // the row kernel
    EXPECT_EQ(m.row_kernel_steps, 1);
    ir::Graph gw = ir::parse_graph(text);
    m = compiler::compile_cuda(gw, {.arch = 90, .row_kernels = false});  // lowered: warp reductions
    ASSERT_EQ(m.kernel_sources.size(), 1u);
    EXPECT_NE(m.kernel_sources[0].find("__shfl_xor_sync"), std::string::npos);
    int warp_launches = 0;
    for (const runtime::cuda::CudaEntry& e : m.program->kernels[0].entries)
        if (e.block == 256 && e.grid == 80) ++warp_launches;  // 640 partial sums / 8 warps per block
    EXPECT_EQ(warp_launches, 2);
    ir::Graph g2 = ir::parse_graph(text);
    compiler::CudaCompiledModel t = compiler::compile_cuda(g2, {.arch = 90, .warp_reductions = false, .row_kernels = false});
    EXPECT_EQ(t.kernel_sources[0].find("__shfl_xor_sync"), std::string::npos);
}

TEST(CudaCodegen, NvrtcErrorsAreCompileErrors) {
    try {
        codegen::compile_cuda("extern \"C\" __global__ void broken() { undeclared_name = 1; }", 90);
        FAIL() << "expected kCompileError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCompileError);
        EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kiln
