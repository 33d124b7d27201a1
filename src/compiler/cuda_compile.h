// compile_cuda(Graph) -> CudaProgram: the GPU slice of compile() (compiler/compile.h). The same
// pass pipeline and fusion groups as on the CPU; each unit lowered with the default GPU schedule
// (compiler/cuda_lower.h) and compiled by NVRTC into the kernel cache; views (Reshape, Flatten,
// ...) alias their input's buffer; matrix products cuBLAS takes and convolutions cuDNN takes run
// there (their epilogues stay generated kernels); units only the CPU runtime's own kernels compute (TopK, CumSum,
// ScatterND) are placed on the host with copies around them (cpu_fallback), as are the units
// the user pins to the CPU (pass/place_devices.h: the placement decides every unit's device; its
// cost model only with place_by_cost). A node with no CUDA kernel and no such placement (an op
// without a TE compute) is a kUnsupported error naming it.
// Static shapes only (symbolic dims must be bound).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pass/place_devices.h"
#include "runtime/cuda/cuda_program.h"

namespace kiln::compiler {

/// The arithmetic of a GPU compile: FP32 throughout; FP32 with TF32 tensor cores allowed in cuBLAS
/// and cuDNN (PyTorch's allow_tf32); or the model converted to FP16 (compiler/half_precision.h).
enum class GpuMath { kFp32, kTf32, kFp16 };

struct CudaCompileOptions {
    std::map<std::string, int64_t> dims;  // values of symbolic dims
    int opt_level = 3;
    int arch = 90;  // sm_<arch>: the GPU's compute capability (an H100 is 90)
    /// Matrix products on cuBLAS where it takes them (compiler/cuda_gemm_match.h) when cuBLAS
    /// loads on this machine; false: every kernel generated.
    bool use_cublas = true;
    /// Convolutions on cuDNN where it takes them (compiler/cuda_conv_match.h) when cuDNN loads
    /// on this machine; false: generated.
    bool use_cudnn = true;
    /// Units the CPU runtime computes with its own kernel (TopK, CumSum, ScatterND) run on the
    /// host between device copies (the runner waits for the GPU there); false: kUnsupported.
    bool cpu_fallback = true;
    /// Units to compute on the CPU (or on the GPU) whatever the rules say: by node name (or first
    /// output's) and by op type (pass::PlacementOptions). A generated unit pinned to the CPU is
    /// compiled for the CPU as a program of its own and run on the host between device copies.
    std::map<std::string, pass::Device> pins, op_pins;
    /// Units no pin or rule places go where the placement's cost model says (kernel estimate +
    /// copies); false: on the GPU. Off by default until measured on a GPU: the runner waits for
    /// the stream at every host step, which the cost model does not price.
    bool place_by_cost = false;
    const pass::DeviceCostModel* cost = nullptr;  // with place_by_cost; nullptr: the nominal roofline
    GpuMath math = GpuMath::kFp32;
    /// Long reductions with few outputs as one warp per output (codegen::CudaEmitOptions); false:
    /// one thread per output (what the CUDA emulation can run).
    bool warp_reductions = true;
    /// Last-axis LayerNormalization and Softmax as one row kernel each (codegen/cuda_row_kernels.h);
    /// false: lowered like any unit.
    bool row_kernels = true;
    /// Best-effort work that real-time work may cut (docs/gpu.md, "Preemption"): every generated
    /// kernel checks a stop flag as each thread block starts (codegen::CudaEmitOptions::stop_flag);
    /// the row kernels are off (they have no check).
    bool preemptible = false;
};

struct CudaCompiledModel {
    std::shared_ptr<runtime::cuda::CudaProgram> program;
    int kernels = 0, compiled = 0;  // compiled: NVRTC runs (the rest came from the cache)
    int cublas_steps = 0;           // products on cuBLAS
    int cudnn_steps = 0;            // convolutions on cuDNN
    int row_kernel_steps = 0;       // layer norms and softmaxes as one row kernel each
    int host_steps = 0;             // steps placed on the CPU
    pass::Placement placement;      // of the optimized graph's nodes (the caller's graph)
    double seconds = 0;
    std::vector<std::string> kernel_sources;  // per kernel, the CUDA C (for inspection)
};

CudaCompiledModel compile_cuda(ir::Graph& g, const CudaCompileOptions& opts = {});

/// What `kiln inspect --place cuda` prints: `g` as compile_cuda optimizes and places it (no
/// kernel is compiled), with a KilnDeviceCopy at every device boundary (pass/insert_device_copies.h)
/// and every node's kiln.device, then pass::placement_summary.
std::string cuda_placement_report(ir::Graph& g, const CudaCompileOptions& opts = {});

}  // namespace kiln::compiler
