// Output-ready reports (output_ready.h).
#include "runtime/output_ready.h"

#include <algorithm>

namespace kiln::runtime {

OutputReadyPlan OutputReadyPlan::build(const Executable& exe) {
    OutputReadyPlan p;
    p.touched_by.resize(exe.steps.size());
    p.touches.assign(exe.outputs.size(), 0);
    // Only the first output naming an output buffer holds it; the others are copies made at the
    // end (collect_outputs), as are inputs and constants.
    std::vector<int> output_of(exe.buffers.size(), -1);
    for (size_t j = exe.outputs.size(); j-- > 0;)
        if (exe.buffers[exe.outputs[j]].role == BufferRole::kOutput) output_of[exe.outputs[j]] = static_cast<int>(j);
    for (size_t s = 0; s < exe.steps.size(); ++s) {
        std::vector<int>& outs = p.touched_by[s];
        for (int id : exe.steps[s].args) {
            const int j = output_of[static_cast<size_t>(id)];
            if (j < 0 || std::find(outs.begin(), outs.end(), j) != outs.end()) continue;  // once per step
            outs.push_back(j);
            ++p.touches[static_cast<size_t>(j)];
        }
    }
    return p;
}

OutputReadiness::OutputReadiness(const OutputReadyPlan* plan, const RunBindings& b, const std::vector<int>& output_ids,
                                 const OutputReadyFn* fn)
    : plan_(plan), fn_(plan && fn && *fn ? fn : nullptr) {
    if (!fn_) return;
    const size_t n = output_ids.size();
    values_.assign(n, nullptr);
    left_.reset(new std::atomic<int>[n]);
    for (size_t j = 0; j < n; ++j) {
        left_[j].store(plan->touches[j], std::memory_order_relaxed);
        auto it = b.fresh_outputs.find(output_ids[j]);  // the bound tensor or the fresh one
        if (plan->touches[j] > 0 && it != b.fresh_outputs.end()) values_[j] = &it->second;
    }
}

void OutputReadiness::step_done(size_t s) {
    if (!fn_) return;
    for (int j : plan_->touched_by[s])
        if (left_[j].fetch_sub(1, std::memory_order_acq_rel) == 1 && values_[j]) (*fn_)(static_cast<size_t>(j), *values_[j]);
}

void OutputReadiness::finish(const std::vector<Tensor>& outputs) {
    if (!fn_) return;
    for (size_t j = 0; j < outputs.size() && j < values_.size(); ++j)
        if (!values_[j]) (*fn_)(j, outputs[j]);
}

}  // namespace kiln::runtime
