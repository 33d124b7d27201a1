// DataflowExecutor: runs an Executable's steps as a dependency graph (TensorFlow's executor):
// per-step pending counts, ready steps handed to an inter-op thread pool, cheap steps run inline
// on the thread that made them ready, async kernels (async_kernel.h) overlapped with the rest.
// Results are bitwise those of the SequentialExecutor: each kernel's math does not depend on
// scheduling, and dependencies keep every buffer's reads and writes in static order.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/step_graph.h"
#include "runtime/thread_pool.h"
#include "support/status.h"

namespace kiln::runtime {

struct DataflowOptions {
    /// A ready step with 0 < StepDesc::flops <= inline_max_flops runs inline on the thread that
    /// made it ready instead of going through the queue (TF's inline_ready). Steps with unknown
    /// cost (flops == 0) are queued.
    double inline_max_flops = 16384;
};

class DataflowExecutor final : public Executor {
public:
    /// intra: the pool of the kernels' parallel loops (nullptr: serial loops); inter: the pool
    /// that runs ready steps (nullptr: only the calling thread).
    DataflowExecutor(std::shared_ptr<Executable> exe, ThreadPool* intra, InterOpThreadPool* inter,
                     Allocator* alloc, DataflowOptions opts = {});
    ~DataflowExecutor() override;
    DataflowExecutor(const DataflowExecutor&) = delete;
    DataflowExecutor& operator=(const DataflowExecutor&) = delete;

    /// As Executor::run. An Executable whose intermediates share memory without a plan made for
    /// concurrency (Executable::planned_for_concurrency) is refused with kInvalidArgument. The
    /// first failing step's Status is returned after every started step has finished.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr, int max_threads = 0,
               const std::vector<const Tensor*>* into = nullptr, const OutputReadyFn* ready = nullptr) override;
    void set_profiler(Profiler* p) override { profiler_ = p; }
    const char* name() const override { return "dataflow"; }

    const StepGraph& step_graph() const { return graph_; }

    struct RunState;

private:
    void process(int step, RunState& st);
    void start_async(int step, RunState& st);
    /// Marks `step` done: consumers whose count reaches zero go to `local` (to run on this
    /// thread) or to the pool; then the run's remaining count drops.
    void complete(int step, RunState& st, std::vector<int>* local);
    bool is_cheap(int step) const;
    void fail(RunState& st, Status s);

    std::shared_ptr<Executable> exe_;
    BufferTable table_;
    ThreadPool* intra_;
    InterOpThreadPool* inter_;
    DataflowOptions opts_;
    StepGraph graph_;
    Status plan_error_;
    Profiler* profiler_ = nullptr;
    std::mutex run_mu_;  // one run at a time: intermediates are per executor
    std::unique_ptr<OutputReadyPlan> ready_plan_;  // made at the first run that asks for reports
};

/// Status of running `exe` concurrently: kInvalidArgument when it needs a concurrency-aware
/// memory plan it does not have (some buffer is shared by steps without a plan for it).
Status check_concurrency_plan(const Executable& exe);

}  // namespace kiln::runtime
