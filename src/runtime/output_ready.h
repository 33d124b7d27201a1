// Output-ready reports (RunControls::on_output_ready): a run tells its caller that a model
// output is final — the last step that reads or writes its buffer has completed — while the
// rest of the run goes on. Data-parallel training starts a bucket's gradient allreduce from it,
// overlapped with the rest of the backward pass (distributed/data_parallel.h).
//
// An output's buffer is its own (not an intermediate's: the memory planner places only
// intermediates, in place or not), so once its last touching step is done no later step reads
// or writes it, and the caller may change it (reduce it in place) before the run returns.
// Outputs no step touches in place (an input, a constant, a buffer an earlier output names,
// copied by BufferTable::collect_outputs) are reported at the end, after the copy.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "support/tensor.h"

namespace kiln::runtime {

/// Called once per model output `output` with the tensor holding it (the caller's bound tensor
/// or the fresh output the run returns: same storage). From the thread that ran the step (in a
/// dataflow run, several threads at once) or the caller's at the end; must not throw.
using OutputReadyFn = std::function<void(size_t output, const Tensor& value)>;

/// Which steps finish which outputs, per executable (made once per executor).
struct OutputReadyPlan {
    std::vector<std::vector<int>> touched_by;  // per step: the outputs whose buffer it reads or writes
    std::vector<int> touches;                  // per output: steps touching it; 0: reported at the end
    static OutputReadyPlan build(const Executable& exe);
};

/// One run's reports.
class OutputReadiness {
public:
    /// `b` is the run's bindings (BufferTable::bind done); with fn or plan null nothing is reported.
    OutputReadiness(const OutputReadyPlan* plan, const RunBindings& b, const std::vector<int>& output_ids,
                    const OutputReadyFn* fn);
    bool active() const { return fn_ != nullptr; }
    /// Step s completed: reports the outputs it was the last to touch. Thread-safe.
    void step_done(size_t s);
    /// After collect_outputs: reports the outputs no step reported.
    void finish(const std::vector<Tensor>& outputs);

private:
    const OutputReadyPlan* plan_ = nullptr;
    const OutputReadyFn* fn_ = nullptr;
    std::vector<const Tensor*> values_;  // per output reported by steps: its tensor
    std::unique_ptr<std::atomic<int>[]> left_;
};

}  // namespace kiln::runtime
