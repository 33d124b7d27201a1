// CudaRunner: runs a CudaProgram on the CUDA device. Construction loads the cubins, allocates
// every buffer from a session allocator with a byte budget (runtime/cuda/cuda_device.h: over
// budget is kOutOfMemory naming the buffer) and uploads the constants. A run copies the inputs
// to the device through pinned staging, enqueues every step's launches on one stream with no
// host synchronization in between, copies the outputs back and synchronizes once.
#pragma once

#include <memory>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/cuda/cublas_gemm.h"
#include "runtime/cuda/cudnn_conv.h"
#include "runtime/extern_kernel.h"
#include "runtime/sequential_executor.h"
#include "runtime/cuda/cuda_program.h"
#include "runtime/cuda/cuda_stream.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime::cuda {

struct CudaRunTiming {
    float gpu_ms = 0;   // first launch to last launch's end (cuEventElapsedTime)
    float total_ms = 0; // input copies to output copies, on the GPU's clock
};

class CudaRunner {
public:
    /// budget_bytes == 0: unlimited. Throws kiln::Error (kOutOfMemory naming the buffer over
    /// the budget, kUnsupported when a cubin does not load on this GPU).
    /// `priority`: its stream's (real-time runs kHigh, best-effort kLow: the GPU's block
    /// scheduler then starts RT blocks ahead of queued BE blocks).
    CudaRunner(std::shared_ptr<const CudaProgram> program, CudaDevice& dev, size_t budget_bytes,
               CudaStream::Priority priority = CudaStream::Priority::kDefault);
    ~CudaRunner();
    CudaRunner(const CudaRunner&) = delete;
    CudaRunner& operator=(const CudaRunner&) = delete;

    /// inputs in program order (dtype and shape checked: kInvalidArgument naming the input);
    /// outputs become fresh host tensors.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
    CudaRunTiming last_timing() const { return timing_; }
    /// Replays the steps as a CUDA graph (captured at the next run, then launched whole: one
    /// launch instead of one per kernel). The copies stay outside the graph.
    void set_use_graph(bool on) { use_graph_ = on; }
    /// One run with an event after every launch (no graph): each step's time on the GPU's clock,
    /// in order, named as errors name them ("kiln_cuda_s0 of node (Add+Relu)", "cuBLAS gemm of
    /// node", ...). The copies are left out.
    Status profile_steps(const std::vector<Tensor>& inputs, std::vector<std::pair<std::string, float>>& steps);
    /// A program compiled preemptible (CudaCompileOptions::preemptible; its kernels stoppable):
    /// request_stop() (any thread) sets the flag its kernels read as each thread block starts,
    /// so the GPU leaves the rest of the run's blocks to other streams' work within one block's
    /// time; the run in progress then waits for clear_stop() and runs again from the first
    /// launch that was cut (from that launch's first block: a launch never reads what it
    /// writes). The answers are those of an uncut run. A program without stoppable kernels
    /// ignores both. Not with graph replay.
    bool preemptible() const { return stop_flag_ != nullptr; }
    void request_stop();
    void clear_stop();
    /// Runs that were cut and resumed since the runner was made.
    uint64_t resumes() const { return resumes_; }
    /// Device bytes this runner holds (buffers, scratch).
    size_t device_bytes() const { return alloc_->bytes_in_use(); }
    /// Per kernel entry: registers and static shared memory as the driver reports them.
    std::string resource_report() const;

private:
    struct Launch {
        CUfunction fn;
        unsigned grid, block;
        std::vector<CUdeviceptr> values;  // argument values (stable storage)
        std::vector<void*> params;        // pointers to values, as cuLaunchKernel takes them
        std::string what;                 // for errors
        const CudaStepDesc* gemm = nullptr;  // a cuBLAS step instead of a kernel
        int conv = -1;                       // a cuDNN step: index into convs_
        int host = -1;                       // a host step: index into hosts_
    };
    /// A step placed on the CPU: its kernel (or CPU program) and host copies of its arguments.
    struct HostStep {
        const CudaStepDesc* step;
        std::unique_ptr<ExternKernel> kernel;
        std::unique_ptr<SequentialExecutor> program;
        std::vector<Tensor> args;
    };
    void load_modules();
    void allocate_buffers();
    void release();
    void prepare_launches();
    Status enqueue_steps(std::vector<std::unique_ptr<CudaEvent>>* step_ends = nullptr, size_t from = 0);
    /// After a preemptible run's steps finished: while a launch was cut, waits for clear_stop()
    /// and enqueues the steps again from the first cut launch.
    Status resume_cut_launches();
    void allocate_stop_flags();
    Status run_gemm(const Launch& l);
    Status run_conv(const Launch& l);
    void prepare_conv_step(const CudaStepDesc& s);
    Status enqueue_graph();
    void prepare_host_step(const CudaStepDesc& s);
    Status run_host_step(HostStep& h);

    std::shared_ptr<const CudaProgram> prog_;
    CudaDevice& dev_;
    std::shared_ptr<CachingAllocator> alloc_;
    std::vector<CUmodule> modules_;
    std::vector<std::vector<CUfunction>> functions_;  // per kernel, per entry
    std::vector<void*> buffer_ptr_;                   // per buffer id (device address)
    std::vector<std::pair<void*, size_t>> owned_;     // what to give back
    std::vector<Launch> launches_;
    CudaStream stream_;
    CudaEvent start_, kernels_start_, kernels_end_, end_;
    PinnedBuffer staging_in_, staging_out_;
    CudaRunTiming timing_;
    std::unique_ptr<CublasGemm> cublas_;  // when the program has cuBLAS steps
    std::unique_ptr<CudnnHandle> cudnn_;  // when it has cuDNN steps
    std::vector<std::unique_ptr<CudnnConv>> convs_;
    void* conv_workspace_ = nullptr;      // shared by the cuDNN steps (one stream: never two at once)
    size_t conv_workspace_bytes_ = 0;
    std::vector<HostStep> hosts_;
    // Pinned host memory the GPU reads and writes (unified addressing): the stop flag, and per
    // stoppable launch its cut flag (-1 in cut_slot_: a launch that cannot be cut).
    int* stop_flag_ = nullptr;
    int* cut_flags_ = nullptr;
    std::vector<int> cut_slot_;  // per launch
    uint64_t resumes_ = 0;
    std::shared_ptr<CpuAllocator> host_alloc_ = std::make_shared<CpuAllocator>();  // host programs' buffers
    bool use_graph_ = false;
    CUgraph graph_ = nullptr;
    CUgraphExec graph_exec_ = nullptr;
};

}  // namespace kiln::runtime::cuda
