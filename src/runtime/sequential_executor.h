// SequentialExecutor: runs an Executable's steps in their static order on the calling thread;
// kernels use the intra-op pool for their parallel loops. Intermediate buffers are allocated
// once (first run) and reused by every later run.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/thread_pool.h"
#include "support/status.h"

namespace kiln::runtime {

/// Where a preemptible run stands between its run_preemptible calls: its bindings (fresh outputs
/// included; the intermediates are the executor's) and the next step to run.
struct ResumePoint {
    bool started = false;
    RunBindings bindings;
    std::vector<bool> restartable;  // per step: may be cut mid-kernel (BufferTable::restartable_steps)
    size_t next_step = 0;
    /// The last stop was inside step next_step's kernel (which runs again from its start).
    bool cut_inside_kernel = false;
};

class SequentialExecutor final : public Executor {
public:
    SequentialExecutor(std::shared_ptr<Executable> exe, ThreadPool* pool, Allocator* alloc);
    ~SequentialExecutor() override;
    SequentialExecutor(const SequentialExecutor&) = delete;
    SequentialExecutor& operator=(const SequentialExecutor&) = delete;

    /// inputs match exe->inputs in order (dtype and shape are checked: a mismatch is a
    /// kInvalidArgument Status naming the input, expected vs got). outputs are (re)allocated
    /// by the executor as fresh tensors.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr, int max_threads = 0,
               const std::vector<const Tensor*>* into = nullptr, const OutputReadyFn* ready = nullptr) override;

    /// Starts (at.started false) or resumes a preemptible run. Before each step, and inside a
    /// restartable step's parallel loops, it checks `request`: when set it stops, leaves `at`
    /// at the step to run next (a step cut inside its kernel runs again from its start) and
    /// returns ok with *finished false. Finished: the outputs, *finished true. Each call may
    /// give other max_threads; inputs must be those of the first call (they are re-read).
    Status run_preemptible(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, ResumePoint& at,
                           const std::atomic<int32_t>& request, const std::atomic<bool>* terminate, int max_threads,
                           bool* finished);

    void set_profiler(Profiler* p) override { profiler_ = p; }
    const char* name() const override { return "sequential"; }

private:
    std::shared_ptr<Executable> exe_;
    BufferTable table_;
    ThreadPool* pool_;
    Profiler* profiler_ = nullptr;
    std::unique_ptr<OutputReadyPlan> ready_plan_;  // made at the first run that asks for reports
};

}  // namespace kiln::runtime
