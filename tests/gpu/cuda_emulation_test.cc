// The generated CUDA kernels' semantics without a GPU: each kernel's CUDA source is compiled as
// host C++ under a shim that makes blockIdx/threadIdx plain variables, and the CudaProgram's
// steps are run by looping over every block and thread of every launch, in launch order, with
// host buffers in place of device memory. The outputs must match the CPU compiler's kernels.
// This checks the emitter, the GPU schedule, the stage-per-launch split, the scratch buffers and
// the argument order in CI; what it cannot check is the driver path (cuda_model_test.cc does,
// on a GPU) and races between threads (the default schedule writes each element from one thread).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <fstream>

#include "compiler/cuda_compile.h"
#include "frontend/onnx/importer.h"
#include "gpu_reference.h"
#include "gpu_test_util.h"
#include "ir/parser.h"
#include "runtime/extern_kernel.h"
#include "runtime/sequential_executor.h"

namespace kiln {
namespace {

using runtime::cuda::CudaProgram;

constexpr const char* kShim = R"(#include <math.h>
#include <string.h>
struct KilnDim3 { unsigned x, y, z; };
static KilnDim3 blockIdx, threadIdx;
extern "C" void kiln_emu_set(unsigned b, unsigned t) { blockIdx.x = b; threadIdx.x = t; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __syncthreads()
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#undef INFINITY
#undef NAN
/* the prelude typedefs its own fixed-width types: rename them clear of the host's */
#define int8_t kiln_emu_i8
#define int16_t kiln_emu_i16
#define int32_t kiln_emu_i32
#define int64_t kiln_emu_i64
#define uint8_t kiln_emu_u8
#define uint16_t kiln_emu_u16
#define uint32_t kiln_emu_u32
#define uint64_t kiln_emu_u64
)";

using Entry = void (*)(...);

// The emulator runs generated kernels only (no cuBLAS on the host), one thread at a time: no
// warp shuffles (the warp reductions and row kernels are checked on a GPU, cuda_model_test.cc).
const compiler::CudaCompileOptions kGenerated{.dims = {}, .opt_level = 3, .arch = 90, .use_cublas = false, .use_cudnn = false,
                                              .warp_reductions = false, .row_kernels = false};

/// Compiles `source` as host C++ (the shim first) into a library; dlopen handle.
void* build_host_library(const std::string& source, const std::string& tag) {
    const std::string dir = std::filesystem::temp_directory_path() / ("kiln_cuda_emu_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string cc = dir + "/" + tag + ".cc", so = dir + "/" + tag + ".so";
    std::ofstream(cc) << kShim << source;
    const std::string cmd = "c++ -O1 -w -shared -fPIC -x c++ " + cc + " -o " + so + " 2>" + dir + "/" + tag + ".log";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    return h;
}

void call_entry(Entry f, std::vector<void*>& a) {
    switch (a.size()) {  // every parameter is a pointer: pass them as such
        case 1: return f(a[0]);
        case 2: return f(a[0], a[1]);
        case 3: return f(a[0], a[1], a[2]);
        case 4: return f(a[0], a[1], a[2], a[3]);
        case 5: return f(a[0], a[1], a[2], a[3], a[4]);
        case 6: return f(a[0], a[1], a[2], a[3], a[4], a[5]);
        case 7: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        case 8: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        case 9: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
        case 10: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
        case 11: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
        case 12: return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
    }
    FAIL() << "emulator: " << a.size() << " kernel arguments";
}

/// Per buffer, host memory standing in for the device's: the planned intermediates at their
/// offsets in `arena` (filled with NaN, so a plan that lets two live buffers share bytes or a
/// kernel that reads what it never wrote shows in the outputs), the inputs copied in.
std::vector<Tensor> device_memory(const CudaProgram& p, const std::vector<Tensor>& inputs, std::vector<float>& arena) {
    arena.assign((p.arena_bytes + 3) / 4, std::numeric_limits<float>::quiet_NaN());
    std::vector<Tensor> mem;
    for (const runtime::BufferDesc& b : p.buffers) {
        if (b.arena_offset >= 0) {
            EXPECT_LE(static_cast<size_t>(b.arena_offset) + b.nbytes(), p.arena_bytes) << b.name;
            mem.push_back(Tensor::borrow(b.dtype, b.shape, reinterpret_cast<char*>(arena.data()) + b.arena_offset));
        } else {
            mem.push_back(b.role == runtime::BufferRole::kConstant ? b.constant.clone() : Tensor(b.dtype, b.shape));
        }
    }
    for (size_t i = 0; i < inputs.size(); ++i) mem[p.inputs[i]] = inputs[i].clone();
    return mem;
}

/// Copies of the program's outputs out of `mem` (before the arena goes).
std::vector<Tensor> outputs_of(const CudaProgram& p, const std::vector<Tensor>& mem) {
    std::vector<Tensor> outs;
    for (int o : p.outputs) outs.push_back(mem[o].clone());
    return outs;
}

/// Runs the program's steps on the host (see the file comment).
std::vector<Tensor> emulate(const compiler::CudaCompiledModel& m, const std::vector<Tensor>& inputs) {
    const CudaProgram& p = *m.program;
    std::vector<float> arena;
    std::vector<Tensor> mem = device_memory(p, inputs, arena);
    std::vector<void*> libs;
    static int built = 0;  // a fresh file name per library: dlopen returns a loaded path's old handle
    for (size_t k = 0; k < p.kernels.size(); ++k) libs.push_back(build_host_library(m.kernel_sources[k], "k" + std::to_string(built++)));
    for (const runtime::cuda::CudaStepDesc& s : p.steps) {
        if (s.host_program) {  // a unit pinned to the CPU: its CPU program on host memory
            std::vector<Tensor> ins, outs;
            for (int i = 0; i < s.num_inputs; ++i) ins.push_back(mem[s.args[i]]);
            auto alloc = std::make_shared<runtime::CpuAllocator>();
            runtime::SequentialExecutor ex(s.host_program, nullptr, alloc.get());
            Status st = ex.run(ins, outs);
            EXPECT_TRUE(st.ok()) << st.message();
            for (size_t i = static_cast<size_t>(s.num_inputs); i < s.args.size() && st.ok(); ++i)
                std::memcpy(mem[s.args[i]].data(), outs.at(i - s.num_inputs).data(), mem[s.args[i]].nbytes());
            continue;
        }
        if (!s.host_extern.empty()) {  // placed on the CPU: the runtime's kernel on host memory
            std::vector<runtime::ExternArg> types;
            std::vector<void*> ptrs;
            for (int b : s.args) {
                types.push_back({mem[b].dtype(), mem[b].shape(), nullptr});
                ptrs.push_back(mem[b].data());
            }
            auto kernel = runtime::find_extern_kernel(s.host_extern)(runtime::ExternParams(s.host_params), types);
            const kiln_kernel_env env{nullptr, [](void*, int64_t n, kiln_task_fn fn, void* ctx) { fn(0, n, ctx); }, nullptr};
            EXPECT_TRUE(kernel->run(ptrs.data(), env, 1).ok());
            continue;
        }
        const runtime::cuda::CudaKernelDesc& k = p.kernels[s.kernel];
        std::vector<void*> args;
        for (int b : s.args) args.push_back(mem[b].data());
        std::vector<std::vector<char>> scratch;
        for (size_t bytes : k.scratch_bytes) scratch.emplace_back(bytes);
        for (auto& sc : scratch) args.push_back(sc.data());
        auto set = reinterpret_cast<void (*)(unsigned, unsigned)>(dlsym(libs[s.kernel], "kiln_emu_set"));
        for (const runtime::cuda::CudaEntry& e : k.entries) {
            auto f = reinterpret_cast<Entry>(dlsym(libs[s.kernel], e.name.c_str()));
            EXPECT_NE(f, nullptr) << e.name;
            if (!f || !set) return {};
            for (unsigned b = 0; b < e.grid; ++b)
                for (unsigned t = 0; t < e.block; ++t) {
                    set(b, t);
                    call_entry(f, args);
                }
        }
    }
    for (void* h : libs) dlclose(h);
    return outputs_of(p, mem);
}

/// A preemptible program (CudaCompileOptions::preemptible) run with its stop flag set as block
/// `stop_block` of launch `stop_launch` (counted over the whole program) starts, then resumed
/// as the runner resumes it: the flag cleared, every launch from the first one whose cut flag
/// is set run again from its first block. `cut_launches` gets the launches whose cut flag was
/// set. Generated kernels only (no host steps).
std::vector<Tensor> emulate_stopped_and_resumed(const compiler::CudaCompiledModel& m, const std::vector<Tensor>& inputs,
                                                int stop_launch, unsigned stop_block, std::vector<int>& cut_launches) {
    const CudaProgram& p = *m.program;
    std::vector<float> arena;
    std::vector<Tensor> mem = device_memory(p, inputs, arena);
    static std::map<std::string, void*> built;  // per source, kept for the process: the cut cases share them
    std::vector<void*> libs;
    for (size_t k = 0; k < p.kernels.size(); ++k) {
        void*& h = built[m.kernel_sources[k]];
        if (!h) h = build_host_library(m.kernel_sources[k], "p" + std::to_string(built.size()));
        libs.push_back(h);
    }
    struct Launch {
        int kernel;
        const runtime::cuda::CudaEntry* entry;
        std::vector<void*> args;  // buffers, scratch (the step's own), then stop and cut
    };
    std::vector<Launch> launches;
    std::vector<std::vector<std::vector<char>>> scratch(p.steps.size());
    int volatile stop = 0;
    std::vector<int> cut;
    for (size_t si = 0; si < p.steps.size(); ++si) {
        const runtime::cuda::CudaStepDesc& s = p.steps[si];
        EXPECT_GE(s.kernel, 0) << "a vendor or host step in the preemption test";
        const runtime::cuda::CudaKernelDesc& k = p.kernels[s.kernel];
        EXPECT_TRUE(k.stoppable);
        for (size_t bytes : k.scratch_bytes) scratch[si].emplace_back(bytes);
        for (const runtime::cuda::CudaEntry& e : k.entries) {
            Launch l{s.kernel, &e, {}};
            for (int b : s.args) l.args.push_back(mem[b].data());
            for (auto& sc : scratch[si]) l.args.push_back(sc.data());
            launches.push_back(std::move(l));
        }
    }
    cut.assign(launches.size(), 0);
    for (size_t i = 0; i < launches.size(); ++i) {
        launches[i].args.push_back(const_cast<int*>(&stop));
        launches[i].args.push_back(&cut[i]);
    }
    auto run = [&](size_t from, bool stopping) {
        for (size_t i = from; i < launches.size(); ++i) {
            const Launch& l = launches[i];
            auto set = reinterpret_cast<void (*)(unsigned, unsigned)>(dlsym(libs[l.kernel], "kiln_emu_set"));
            auto f = reinterpret_cast<Entry>(dlsym(libs[l.kernel], l.entry->name.c_str()));
            ASSERT_TRUE(f && set) << l.entry->name;
            std::vector<void*> args = l.args;
            for (unsigned b = 0; b < l.entry->grid; ++b) {
                if (stopping && static_cast<int>(i) == stop_launch && b == stop_block) stop = 1;
                for (unsigned t = 0; t < l.entry->block; ++t) {
                    set(b, t);
                    call_entry(f, args);
                }
            }
        }
    };
    run(0, true);
    for (size_t i = 0; i < cut.size(); ++i)
        if (cut[i]) cut_launches.push_back(static_cast<int>(i));
    stop = 0;  // real-time work done: resume from the first cut launch
    if (!cut_launches.empty()) run(static_cast<size_t>(cut_launches.front()), false);
    return outputs_of(p, mem);
}

/// The emulator needs a host C++ compiler (the development and CI machines have one).
bool have_host_cxx() { return std::system("c++ --version > /dev/null 2>&1") == 0; }

TEST(CudaEmulation, EveryDefaultScheduleMatchesTheCpuKernel) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    for (const gpu_testing::Case& c : gpu_testing::schedule_cases()) {
        SCOPED_TRACE(c.name);
        ir::Graph g = ir::parse_graph(c.graph);
        std::vector<Tensor> in = gpu_testing::random_inputs(g, 5);
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, kGenerated);
        const double err = gpu_testing::max_rel_error(emulate(m, in), gpu_testing::run_cpu(ir::parse_graph(c.graph), in));
        std::printf("%-18s emulated, max rel error vs CPU %.3g\n", c.name, err);
        EXPECT_LE(err, 1e-5);
    }
}

/// FP16 (compiler/half_precision.h): the converted graph's generated kernels, emulated, against
/// the CPU's FP32 kernels. FP16 keeps 11 significant bits: outputs within 1e-2 of their scale.
TEST(CudaEmulation, HalfPrecisionKernelsMatchTheCpuWithinFp16) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    compiler::CudaCompileOptions half = kGenerated;
    half.math = compiler::GpuMath::kFp16;
    std::vector<std::pair<std::string, std::string>> graphs;
    for (const gpu_testing::Case& c : gpu_testing::schedule_cases()) graphs.emplace_back(c.name, c.graph);
    for (const gpu_testing::ConvCase& c : gpu_testing::conv_cases()) graphs.emplace_back(c.name, c.graph);
    for (const auto& [name, text] : graphs) {
        SCOPED_TRACE(name);
        ir::Graph g = ir::parse_graph(text);
        std::vector<Tensor> in = gpu_testing::random_inputs(g, 5);
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, half);
        for (int i : m.program->inputs) EXPECT_EQ(m.program->buffers[i].dtype, DType::kFloat32);  // the signature stays
        for (int o : m.program->outputs) EXPECT_EQ(m.program->buffers[o].dtype, DType::kFloat32);
        const double err = gpu_testing::max_scaled_error(emulate(m, in), gpu_testing::run_cpu(ir::parse_graph(text), in));
        std::printf("%-18s FP16 emulated, max scaled error vs CPU FP32 %.3g\n", name.c_str(), err);
        EXPECT_LE(err, 1e-2);
    }
}

TEST(CudaEmulation, HostPlacedStepsMatchTheCpu) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    ir::Graph g = ir::parse_graph(gpu_testing::placement_case());
    std::vector<Tensor> in = gpu_testing::random_inputs(g, 6);
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, kGenerated);
    ASSERT_EQ(m.host_steps, 1);
    const double err = gpu_testing::max_rel_error(emulate(m, in), gpu_testing::run_cpu(ir::parse_graph(gpu_testing::placement_case()), in));
    EXPECT_LE(err, 1e-5);
}

// Units pinned to the CPU (pass/place_devices.h) between GPU kernels: each runs as a CPU
// program of its own, its arguments copied around it; the whole matches the CPU session.
TEST(CudaEmulation, UnitsPinnedToTheCpuMatchTheCpu) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    ir::Graph g = ir::parse_graph(gpu_testing::pinned_case());
    std::vector<Tensor> in = gpu_testing::random_inputs(g, 4);
    compiler::CudaCompileOptions o = kGenerated;
    o.pins = {{"m", pass::Device::kCpu}};  // the product and its Relu (one group) on the host
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, o);
    EXPECT_EQ(m.host_steps, 1);
    int programs = 0;
    for (const runtime::cuda::CudaStepDesc& s : m.program->steps) programs += s.host_program != nullptr;
    EXPECT_EQ(programs, 1);
    EXPECT_EQ(m.program->steps.size(), 3u);  // softmax on the GPU, the CPU program, softmax on the GPU
    const double err = gpu_testing::max_rel_error(emulate(m, in), gpu_testing::run_cpu(ir::parse_graph(gpu_testing::pinned_case()), in));
    EXPECT_LE(err, 1e-5);
}

// REEF's cut on the GPU (CudaCompileOptions::preemptible): a stop flag set as some thread block
// of some launch starts makes that block and every later one of the run compute nothing and
// mark their launches cut; resumed from the first cut launch, the outputs are the CPU's. Cut
// at each launch's first block, at a middle block, and never.
TEST(CudaEmulation, PreemptedKernelsResumeFromTheFirstCutLaunch) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    ir::Graph g = ir::parse_graph(gpu_testing::pinned_case());
    std::vector<Tensor> in = gpu_testing::random_inputs(g, 12);
    compiler::CudaCompileOptions o = kGenerated;
    o.preemptible = true;
    compiler::CudaCompiledModel m = compiler::compile_cuda(g, o);
    for (const std::string& src : m.kernel_sources) EXPECT_NE(src.find("kiln_stopped"), std::string::npos);
    const std::vector<Tensor> cpu = gpu_testing::run_cpu(ir::parse_graph(gpu_testing::pinned_case()), in);
    std::vector<unsigned> grids;  // per launch
    for (const runtime::cuda::CudaStepDesc& s : m.program->steps)
        for (const runtime::cuda::CudaEntry& e : m.program->kernels[s.kernel].entries) grids.push_back(e.grid);
    const int launches = static_cast<int>(grids.size());
    ASSERT_GE(launches, 3);
    struct Cut {
        int launch;
        unsigned block;
    };
    std::vector<Cut> cuts = {{launches, 0}};  // never
    for (int l = 0; l < launches; ++l) {
        cuts.push_back({l, 0});
        if (grids[l] >= 2) cuts.push_back({l, grids[l] / 2});  // some blocks done, the rest cut
    }
    for (const Cut& c : cuts) {
        SCOPED_TRACE("stop at launch " + std::to_string(c.launch) + " block " + std::to_string(c.block));
        std::vector<int> cut;
        const std::vector<Tensor> out = emulate_stopped_and_resumed(m, in, c.launch, c.block, cut);
        if (c.launch >= launches) {
            EXPECT_TRUE(cut.empty());
        } else {
            ASSERT_FALSE(cut.empty());
            EXPECT_EQ(cut.front(), c.launch);  // later launches are all cut too
            EXPECT_EQ(cut.back(), launches - 1);
        }
        EXPECT_LE(gpu_testing::max_rel_error(out, cpu), 1e-5);
    }
}

TEST(CudaEmulation, TestModelsMatchTheCpu) {
    if (!have_host_cxx()) GTEST_SKIP() << "no host C++ compiler (c++)";
    int found = 0;
    for (const char* name : {"mlp", "bert_tiny", "small_cnn", "resnet_block"}) {
        const std::string path = gpu_testing::test_model_path(name);
        if (!std::filesystem::exists(path)) continue;
        ++found;
        SCOPED_TRACE(path);
        ir::Graph g = frontend::import_onnx_file(path);
        std::vector<Tensor> in = gpu_testing::random_inputs(g, 9);
        compiler::CudaCompiledModel m = compiler::compile_cuda(g, kGenerated);
        const std::vector<Tensor> cpu = gpu_testing::run_cpu(frontend::import_onnx_file(path), in);
        const double err = gpu_testing::max_rel_error(emulate(m, in), cpu);
        std::printf("%-10s emulated, max rel error vs CPU %.3g\n", name, err);
        EXPECT_LE(err, 1e-4);
        compiler::CudaCompileOptions half = kGenerated;
        half.math = compiler::GpuMath::kFp16;
        ir::Graph gh = frontend::import_onnx_file(path);
        const double herr = gpu_testing::max_scaled_error(emulate(compiler::compile_cuda(gh, half), in), cpu);
        std::printf("%-10s FP16 emulated, max scaled error vs CPU FP32 %.3g\n", name, herr);
        EXPECT_LE(herr, 2e-2);  // several layers, each rounding to FP16
    }
    if (found == 0) GTEST_SKIP() << "no test model generated (" << gpu_testing::test_model_path("mlp") << ")";
}

}  // namespace
}  // namespace kiln
