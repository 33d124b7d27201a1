// SequentialExecutor: calls each step's kernel in the Executable's static order on the calling
// thread. Memory binding (intermediates once, inputs/outputs per run) is the BufferTable's.
#include "runtime/sequential_executor.h"

namespace kiln::runtime {

SequentialExecutor::SequentialExecutor(std::shared_ptr<Executable> exe, ThreadPool* pool, Allocator* alloc)
    : exe_(exe), table_(std::move(exe), alloc), pool_(pool) {}

SequentialExecutor::~SequentialExecutor() = default;

Status cancelled_status(const std::string& node_name) {
    return Status(ErrorKind::kCancelled, "run terminated (RunOptions::terminate) before node '" + node_name + "'");
}

Status SequentialExecutor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                               const std::atomic<bool>* terminate) {
    RunBindings b;
    Status st = table_.bind(inputs, b);
    if (!st.ok()) return st;
    kiln_kernel_env env = make_kernel_env(pool_);
    ProfiledRun* prof = profiler_ ? profiler_->begin_run(exe_) : nullptr;
    for (size_t s = 0; s < table_.executable().steps.size(); ++s) {
        if (terminate && terminate->load(std::memory_order_relaxed))
            return cancelled_status(table_.executable().steps[s].node_name);
        StepTimer timer(profiler_, prof, s);
        st = table_.run_step(s, b, env);
        if (!st.ok()) return st;
    }
    table_.collect_outputs(b, outputs);
    return Status::ok_status();
}

}  // namespace kiln::runtime
