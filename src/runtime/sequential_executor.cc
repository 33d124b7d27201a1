// SequentialExecutor: calls each step's kernel in the Executable's static order on the calling
// thread. Memory binding (intermediates once, inputs/outputs per run) is the BufferTable's.
//
// A preemptible run (run_preemptible) is the same loop, resumable: its whole state between calls
// is its bindings and one step index, which is why preemption uses this executor (a dataflow
// run's state would be a frontier of in-flight steps). A step is stopped inside its kernel only
// when it is restartable (reads nothing it writes): the kernel's loops stop early and the step
// runs again from its start on resume, so the result is that of an uninterrupted run.
#include "runtime/sequential_executor.h"

#include "runtime/prepare_externs.h"
#include "runtime/run_control.h"

namespace kiln::runtime {

SequentialExecutor::SequentialExecutor(std::shared_ptr<Executable> exe, ThreadPool* pool, Allocator* alloc)
    : exe_(exe), table_(std::move(exe), alloc), pool_(pool) {}

SequentialExecutor::~SequentialExecutor() = default;

Status cancelled_status(const std::string& node_name) {
    return Status(ErrorKind::kCancelled, "run terminated (RunOptions::terminate) before node '" + node_name + "'");
}

Status SequentialExecutor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                               const std::atomic<bool>* terminate, int max_threads,
                               const std::vector<const Tensor*>* into, const OutputReadyFn* ready) {
    RunBindings b;
    Status st = table_.bind(inputs, b, into);
    if (!st.ok()) return st;
    if (ready && !ready_plan_) ready_plan_ = std::make_unique<OutputReadyPlan>(OutputReadyPlan::build(*exe_));
    OutputReadiness readiness(ready_plan_.get(), b, exe_->outputs, ready);
    RunControl control(pool_, max_threads);
    kiln_kernel_env env = control.env(false);
    if (b.new_dims) prepare_externs_at(*exe_, b.dims, env);  // new shapes' kernels, made together
    ProfiledRun* prof = profiler_ ? profiler_->begin_run(exe_) : nullptr;
    for (size_t s = 0; s < table_.executable().steps.size(); ++s) {
        if (terminate && terminate->load(std::memory_order_relaxed))
            return cancelled_status(table_.executable().steps[s].node_name);
        StepTimer timer(profiler_, prof, s);
        st = table_.run_step(s, b, env);
        if (!st.ok()) return st;
        readiness.step_done(s);
    }
    table_.collect_outputs(b, outputs);
    readiness.finish(outputs);
    return Status::ok_status();
}

Status SequentialExecutor::run_preemptible(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                                           ResumePoint& at, const std::atomic<int32_t>& request,
                                           const std::atomic<bool>* terminate, int max_threads, bool* finished) {
    *finished = false;
    Status st = at.started ? table_.rebind_inputs(inputs, at.bindings) : table_.bind(inputs, at.bindings);
    if (!st.ok()) return st;
    if (!at.started) {
        at.restartable = table_.restartable_steps(at.bindings);
        at.next_step = 0;
        at.started = true;
    }
    at.cut_inside_kernel = false;
    RunControl control(pool_, max_threads, &request);
    const kiln_kernel_env cuttable = control.env(true), whole = control.env(false);
    if (at.next_step == 0 && at.bindings.new_dims) prepare_externs_at(*exe_, at.bindings.dims, whole);
    ProfiledRun* prof = profiler_ ? profiler_->begin_run(exe_) : nullptr;
    const auto& steps = table_.executable().steps;
    for (size_t& s = at.next_step; s < steps.size(); ++s) {
        if (terminate && terminate->load(std::memory_order_relaxed)) return cancelled_status(steps[s].node_name);
        if (control.requested()) return Status::ok_status();
        {
            StepTimer timer(profiler_, prof, s);
            st = table_.run_step(s, at.bindings, at.restartable[s] ? cuttable : whole);
        }
        // A loop that left iterations undone makes the step cut short, whatever the kernel
        // returned (run_control.h); it runs again from its start.
        if (control.take_stopped()) {
            at.cut_inside_kernel = true;
            return Status::ok_status();
        }
        if (!st.ok()) return st;
    }
    table_.collect_outputs(at.bindings, outputs);
    *finished = true;
    return Status::ok_status();
}

}  // namespace kiln::runtime
