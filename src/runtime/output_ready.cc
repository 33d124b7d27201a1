// Output-ready reports (output_ready.h).
#include "runtime/output_ready.h"

#include <algorithm>
#include <set>

namespace kiln::runtime {

OutputReadyPlan OutputReadyPlan::build(const Executable& exe) {
    OutputReadyPlan p;
    p.touched_by.resize(exe.steps.size());
    p.touches.assign(exe.outputs.size(), 0);
    std::set<int> seen;
    for (size_t j = 0; j < exe.outputs.size(); ++j) {
        const int id = exe.outputs[j];
        // Only the first output naming an output buffer holds it; the others are copies made at
        // the end (collect_outputs), as are inputs and constants.
        if (exe.buffers[id].role != BufferRole::kOutput || !seen.insert(id).second) continue;
        for (size_t s = 0; s < exe.steps.size(); ++s) {
            const std::vector<int>& args = exe.steps[s].args;
            if (std::find(args.begin(), args.end(), id) == args.end()) continue;
            p.touched_by[s].push_back(static_cast<int>(j));
            ++p.touches[j];
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
