// Executable: a compiled model, self-contained and depending on the runtime only.
// It is a table of kernels (shared libraries + symbols), a table of buffers (inputs, outputs,
// constants with their data, intermediates), and a static order of steps (kernel, buffer args).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/kernel_abi.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

enum class BufferRole { kInput, kOutput, kConstant, kIntermediate };

struct BufferDesc {
    std::string name;
    DType dtype = DType::kFloat32;
    Shape shape;
    BufferRole role = BufferRole::kIntermediate;
    Tensor constant;  // data, for kConstant
    /// For a planned kIntermediate: its byte offset in the Executable's arena (-1 = its own
    /// allocation). Set by the static memory planner (src/plan).
    int64_t arena_offset = -1;
    /// In an executable with symbolic dims (Executable::dims): per axis, the index of the dim it
    /// equals, or -1 where `shape` holds the size (`shape` holds 0 at a symbolic axis). Empty: a
    /// static shape. A symbolic intermediate is placed per run (runtime/dims_plan.h).
    std::vector<int> dim_of;
    bool is_symbolic() const { return !dim_of.empty(); }
    /// The shape at these values of Executable::dims.
    Shape shape_at(const std::vector<int64_t>& dims) const;
    size_t nbytes() const { return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype); }
};

struct KernelDesc {
    std::string library;      // path of the compiled shared library
    std::string symbol;       // exported kiln_kernel_fn
    std::string description;  // the ops it computes, e.g. "Conv+Relu"
    /// A runtime built-in asynchronous kernel named by `symbol` (library empty): it starts its
    /// work and signals completion later (runtime/async_kernel.h), e.g. "kiln_async_copy".
    bool is_async = false;
    /// An extern kernel (runtime/extern_kernel.h) named `extern_name` (library empty), built from
    /// `extern_params` and the argument types of the one step that uses it.
    std::string extern_name;
    std::string extern_params;
    bool is_extern() const { return !extern_name.empty(); }
    /// A TF1 control-flow step (Switch, Merge, Enter, Exit, NextIteration; library empty) with
    /// its parameters in ExternParams's format ("frame=loop;slot=0"): only the frames executor
    /// (runtime/frame_executor.h) runs an executable that has one.
    std::string control;
    std::string control_params;
    bool is_control() const { return !control.empty(); }
    /// A generated kernel with symbolic dims: `symbol` is a kiln_kernel_dims_fn, called with the
    /// values StepDesc::dims selects. An extern kernel with symbolic dims is made per run-time
    /// shape from its parameters (runtime/extern_at_shapes.h; dnnl_conv only).
    bool takes_dims = false;
};

struct StepDesc {
    int kernel = -1;
    std::vector<int> args;  // buffer ids: inputs, then outputs
    std::string node_name;  // for errors and profiles
    /// How many leading args are read (the rest are written); -1 = unknown: executors then
    /// treat every arg as read and written (conservative ordering).
    int num_inputs = -1;
    /// Estimated floating-point operations of one call (Conv/Gemm/MatMul: 2*MACs; others: output
    /// elements); the profiler's GFLOP/s and the dataflow executor's inline/auto decisions.
    double flops = 0;
    /// For a kernel that takes dims (KernelDesc::takes_dims): indices into Executable::dims, in
    /// the kernel's dims order.
    std::vector<int> dims;
    /// Symbolic executables: (output, input) buffer pairs this step may compute in place (an
    /// elementwise kernel without `restrict`, oneDNN's sum post-op over its residual); the
    /// per-run plan puts the output on the input where the input dies here (runtime/dims_plan.h).
    /// Static executables carry this in their arena offsets instead.
    std::vector<std::pair<int, int>> inplace;
};

/// Bounds on a symbolic dim (min <= Executable::dims[dim] <= max): one the model's meaning
/// requires (an upper bound: position ids sliced from a table of `max` rows; `node` names it),
/// or a range the user declared (SessionOptions::dim_ranges; `node` empty). A run outside it is
/// an error naming the dim and the bound (runtime/dims_plan.h), never rows repeated silently.
struct DimLimit {
    int dim = -1;
    int64_t min = 0;
    int64_t max = 0;
    std::string node;
};

/// An index input a step reads, checked before the step runs (runtime/index_check.h): ONNX
/// leaves an out-of-range index undefined and the generated kernels clamp it into the axis
/// (a kernel cannot raise), so a run with one is an error naming `node`, as ONNX Runtime's is.
/// Every element must lie in [0, extent), or in [-extent, extent) when `negative_from_end`,
/// or equal `ignore` when `has_ignore` (a loss's ignore_index).
struct IndexCheck {
    int step = -1;
    int arg = -1;          // the index input: a position in the step's args
    int64_t extent = 0;    // the axis the indices address (extent_dim < 0)
    int extent_dim = -1;   // >= 0: the extent is Executable::dims[extent_dim] (a symbolic axis)
    /// Only elements i with i % period == phase (GatherND: the last axis of its indices holds
    /// one index per data axis, each checked against its own axis).
    int period = 1, phase = 0;
    bool negative_from_end = true;
    bool has_ignore = false;
    int64_t ignore = 0;
    std::string node;      // "node 'emb' (Gather)"
    std::string what;      // "indices", "target"
};

/// Two symbolic dims the model's meaning requires equal (Executable::dims[a] == dims[b]): the
/// two sides of an elementwise node or a Concat whose dims the compiler could not prove equal
/// (PP-OCR's detector adds an upsampled 2*floor((H+31)/32) to a floor((H+15)/16): equal when H
/// is a multiple of 32), or a dim and a constant (an axis a Squeeze removes: 1). A run where they
/// differ is an error naming `node`, as ONNX Runtime's would be.
struct DimEquality {
    int a = -1, b = -1;  // b = -1: dims[a] must equal `value` (a squeezed axis: 1)
    int64_t value = 0;
    std::string node;
};

class LoadedLibrary;
class ExternKernel;

/// What a kernel stopped inside by preemption (env.stop, KILN_KERNEL_STOPPED) returns.
Status kernel_stopped_status();

class Executable {
public:
    Executable() = default;
    ~Executable();
    Executable(const Executable&) = delete;
    Executable& operator=(const Executable&) = delete;

    std::vector<BufferDesc> buffers;
    std::vector<KernelDesc> kernels;
    std::vector<StepDesc> steps;
    std::vector<int> inputs;   // buffer ids of the model inputs, in model order
    std::vector<int> outputs;  // buffer ids of the model outputs, in model order
    /// (output, input) positions in `outputs` / `inputs`: the output may be written over the
    /// input's memory when the caller gives the input up (binds that output to the input's tensor
    /// through RunControls::outputs_into); the compiler checked that this computes what a fresh
    /// output would (compiler/donation.h), and the step graph orders the output's writer after
    /// every other reader of the input (step_graph.h).
    std::vector<std::pair<int, int>> donations;
    /// Set by the memory planner when its plan lets no two steps that may run concurrently (per
    /// the step dependency graph) share memory; the DataflowExecutor requires it whenever
    /// intermediates share memory. An executable without shared memory may set it directly.
    bool planned_for_concurrency = false;
    /// Bytes of the one arena that holds every planned intermediate (BufferDesc::arena_offset).
    size_t arena_bytes = 0;
    /// The model's symbolic dims (docs/dynamic_shapes.md): one executable serves every value.
    /// Each run binds them from its inputs' shapes (runtime/dims_plan.h); symbolic
    /// intermediates are then placed in an arena planned for those values. Empty: static.
    std::vector<std::string> dims;
    bool is_symbolic() const { return !dims.empty(); }
    /// Bounds on the dims, checked when a run binds them.
    std::vector<DimLimit> dim_limits;
    /// Pairs of dims that must be equal, checked when a run binds them.
    std::vector<DimEquality> dim_equalities;
    /// Index inputs checked before their steps run (static and symbolic executables alike).
    std::vector<IndexCheck> index_checks;

    /// dlopens every kernel library and resolves symbols, and builds the extern kernels
    /// (idempotent). Throws kiln::Error.
    void load();
    /// Kernels whose KernelDesc::library is `name` resolve their symbols in `lib` (loaded by the
    /// caller, e.g. from an artifact's bytes: runtime/memory_library.h) instead of dlopening a
    /// path. Call before load().
    void provide_library(const std::string& name, std::shared_ptr<LoadedLibrary> lib);
    kiln_kernel_fn kernel_fn(int kernel) const;
    /// Generated kernel `kernels[i]` runs `symbols[i]` of the library at `libraries[i]` from now
    /// on, for runs in flight too (the next call of it), e.g. an -O3 build of the same source
    /// (compiler/kernel_upgrade.h). The libraries are loaded and every symbol resolved before
    /// any kernel changes; the ones replaced stay loaded while the Executable lives (a call may
    /// still run them). KernelDesc keeps naming the first library. Throws kiln::Error.
    void replace_kernels(const std::vector<int>& kernels, const std::vector<std::string>& libraries,
                         const std::vector<std::string>& symbols);
    bool loaded() const { return !fns_.empty() || kernels.empty(); }
    /// Runs a loaded (non-async) kernel on `args`; extern kernels get the env's thread count
    /// (kernel_env_threads). A kernel cut short by env.stop gives kernel_stopped_status().
    Status run_kernel(int kernel, void* const* args, const kiln_kernel_env& env) const;
    /// Runs a kernel that takes dims (KernelDesc::takes_dims) with their values.
    Status run_kernel(int kernel, void* const* args, const int64_t* dims, const kiln_kernel_env& env) const;
    /// The extern kernel of a loaded executable's kernel `kernel` (null for a generated one).
    ExternKernel* extern_kernel(int kernel) const { return externs_.at(static_cast<size_t>(kernel)).get(); }

private:
    static Status kernel_status(int32_t rc);
    std::shared_ptr<ExternKernel> make_extern(int kernel) const;
    std::map<std::string, std::shared_ptr<LoadedLibrary>> provided_;
    std::vector<std::shared_ptr<LoadedLibrary>> libs_;
    std::mutex replace_mu_;  // replace_kernels: one at a time (libs_ grows)
    /// Read and written through std::atomic_ref once loaded: replace_kernels may store while
    /// runs read.
    mutable std::vector<kiln_kernel_fn> fns_;
    std::vector<std::shared_ptr<ExternKernel>> externs_;  // per kernel; null for generated ones
};

}  // namespace kiln::runtime
