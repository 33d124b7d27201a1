#include "run_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "compiler/cuda_compile.h"
#include "frontend/onnx/importer.h"
#include "kiln/kiln.h"
#include "random_inputs.h"
#include "runtime/cuda/cuda_runner.h"
#include "support/npy.h"
#include "tensor_format.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// The inputs: --input files by name, else seeded random data of the graph input's type.
std::map<std::string, Tensor> make_feeds(const ir::Graph& g, const CudaRunArgs& args) {
    std::map<std::string, Tensor> feeds;
    if (!args.inputs_npz.empty()) feeds = read_npz(args.inputs_npz);
    for (const std::string& nv : args.inputs) {
        const size_t eq = nv.find('=');
        KILN_CHECK(eq != std::string::npos, kInvalidArgument) << "--input takes NAME=FILE.npy, got '" << nv << "'";
        feeds[nv.substr(0, eq)] = read_npy(nv.substr(eq + 1));
    }
    RandomInputs random(args.seed);
    for (const ir::Value* in : g.inputs()) {
        if (feeds.count(in->name())) continue;
        Shape shape;
        for (const ir::Dim& d : in->type().shape) {
            if (d.is_static()) {
                shape.push_back(d.value);
                continue;
            }
            auto it = args.dims.find(d.symbol);
            KILN_CHECK(it != args.dims.end(), kInvalidArgument)
                << "input '" << in->name() << "' has symbolic dim '" << d.symbol << "': give it with --dim " << d.symbol << "=N";
            shape.push_back(it->second);
        }
        feeds[in->name()] = random.make(in->type().dtype, shape);
    }
    return feeds;
}

/// Largest |gpu - cpu| / max(1, |cpu|) over the float outputs.
double max_rel_error(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu) {
    double worst = 0;
    for (size_t i = 0; i < gpu.size() && i < cpu.size(); ++i) {
        if (gpu[i].dtype() != DType::kFloat32 || cpu[i].dtype() != DType::kFloat32 || gpu[i].numel() != cpu[i].numel()) continue;
        const float* a = gpu[i].data_as<float>();
        const float* b = cpu[i].data_as<float>();
        for (int64_t k = 0; k < gpu[i].numel(); ++k)
            worst = std::max(worst, std::abs(static_cast<double>(a[k]) - b[k]) / std::max(1.0, std::abs(static_cast<double>(b[k]))));
    }
    return worst;
}

/// The steps' GPU time (one profiled run), grouped by what they compute: "cuBLAS gemm",
/// "cuDNN convolution", or the fused ops of a generated kernel ("Add+Relu").
void print_gpu_profile(runtime::cuda::CudaRunner& runner, const std::vector<Tensor>& inputs) {
    std::vector<std::pair<std::string, float>> steps;
    Status s = runner.profile_steps(inputs, steps);
    if (!s.ok()) {
        fmt::print("GPU profile: not available ({})\n", s.message());
        return;
    }
    std::map<std::string, std::pair<double, int>> by_kind;  // kind -> (ms, launches)
    double total = 0;
    for (const auto& [what, ms] : steps) {
        std::string kind = what.substr(0, what.find(" of "));
        if (const size_t paren = what.rfind(" ("); kind.rfind("kiln_cuda", 0) == 0 && paren != std::string::npos)
            kind = what.substr(paren + 2, what.size() - paren - 3);  // a generated kernel: its ops
        by_kind[kind].first += ms;
        by_kind[kind].second += 1;
        total += ms;
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_kind.begin(), by_kind.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    fmt::print("GPU profile ({} launches, {:.3f} ms on the GPU's clock, events between launches):\n", steps.size(), total);
    for (size_t i = 0; i < rows.size() && i < 15; ++i)
        fmt::print("  {:7.3f} ms {:5.1f}% {:4d}x  {}\n", rows[i].second.first, 100 * rows[i].second.first / std::max(total, 1e-9),
                   rows[i].second.second, rows[i].first);
}

}  // namespace

int run_model_cuda(const CudaRunArgs& args) {
    std::string why;
    runtime::cuda::CudaDevice* dev = runtime::cuda::CudaDevice::get(&why);
    KILN_CHECK(dev != nullptr, kUnsupported) << "--device cuda: no usable GPU: " << why;
    KILN_CHECK(std::filesystem::is_regular_file(args.model), kIOError) << "cannot open model '" << args.model << "': no such file";
    ir::Graph g = frontend::import_onnx_file(args.model);
    std::map<std::string, Tensor> feeds = make_feeds(g, args);
    std::vector<Tensor> inputs;
    for (const ir::Value* in : g.inputs()) inputs.push_back(feeds.at(in->name()));
    std::vector<std::string> output_names;
    for (const ir::Value* o : g.outputs()) output_names.push_back(o->name());

    compiler::CudaCompileOptions copts;
    copts.dims = args.dims;
    copts.opt_level = args.opt_level;
    copts.arch = dev->arch();
    copts.use_cublas = args.use_vendor_libraries;
    copts.use_cudnn = args.use_vendor_libraries;
    copts.math = args.gpu_math == "fp16" ? compiler::GpuMath::kFp16
                 : args.gpu_math == "tf32" ? compiler::GpuMath::kTf32
                                           : compiler::GpuMath::kFp32;
    apply_device_placement(args.placement, copts);
    compiler::CudaCompiledModel cm = compiler::compile_cuda(g, copts);
    fmt::print("device {} (sm_{}, {} SMs, {:.1f} GiB)\n", dev->name(), dev->arch(), dev->multiprocessors(),
               static_cast<double>(dev->total_memory()) / (1 << 30));
    fmt::print("compiled {} CUDA kernels ({} by NVRTC, {} cached) for {} steps ({} on cuBLAS, {} on cuDNN, {} placed on the "
               "CPU; {} arithmetic) in {:.2f} s\n",
               cm.kernels, cm.compiled, cm.kernels - cm.compiled, cm.program->steps.size(), cm.cublas_steps, cm.cudnn_steps,
               cm.host_steps, args.gpu_math, cm.seconds);
    runtime::cuda::CudaRunner runner(cm.program, *dev, args.memory_limit);
    std::vector<Tensor> outputs;
    runner.run(inputs, outputs).throw_if_error();  // warm-up
    std::vector<double> wall, gpu;
    for (int r = 0; r < args.repeat; ++r) {
        const auto t0 = Clock::now();
        runner.run(inputs, outputs).throw_if_error();
        wall.push_back(ms_since(t0));
        gpu.push_back(runner.last_timing().gpu_ms);
    }
    // The same steps replayed as one CUDA graph: what per-kernel launches cost.
    runner.set_use_graph(true);
    std::vector<Tensor> graph_outputs;
    Status gs = runner.run(inputs, graph_outputs);
    std::vector<double> graph_wall, graph_gpu;
    for (int r = 0; gs.ok() && r < args.repeat; ++r) {
        const auto t0 = Clock::now();
        gs = runner.run(inputs, graph_outputs);
        graph_wall.push_back(ms_since(t0));
        graph_gpu.push_back(runner.last_timing().gpu_ms);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        fmt::print("{}: {} {}\n", output_names[i], dtype_name(outputs[i].dtype()), shape_str(outputs[i].shape()));
        fmt::print("  values: {}\n", format_leading_values(outputs[i], 10));
    }
    fmt::print("median {:.3f} ms per run ({} runs; kernels on the GPU {:.3f} ms, device memory {} bytes)\n",
               median_of(wall), wall.size(), median_of(gpu), runner.device_bytes());
    if (gs.ok())
        fmt::print("CUDA graph replay: median {:.3f} ms per run (kernels on the GPU {:.3f} ms), same outputs: {}\n",
                   median_of(graph_wall), median_of(graph_gpu), max_rel_error(graph_outputs, outputs) == 0 ? "yes" : "NO");
    else
        fmt::print("CUDA graph replay: not available ({})\n", gs.message());
    if (args.profile_summary) print_gpu_profile(runner, inputs);
    if (args.compare_cpu) {
        SessionOptions so;
        so.dims = args.dims;
        std::vector<Tensor> cpu = Session::load(args.model, so)->run(feeds);
        fmt::print("max relative error vs CPU: {:.3g}\n", max_rel_error(outputs, cpu));
    }
    if (!args.output_dir.empty()) {
        std::filesystem::create_directories(args.output_dir);
        for (size_t i = 0; i < outputs.size(); ++i) write_npy(args.output_dir + "/" + output_names[i] + ".npy", outputs[i]);
    }
    return 0;
}

}  // namespace kiln::cli
