// The dependency DAG of a step sequence (step B depends on step A when B reads a tensor A
// writes) and its ancestor sets, used by concurrency-aware planning and its checker.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/memory_plan.h"

namespace kiln::plan {

/// Ancestor sets of every step as bitsets: strict ancestors, i.e. the steps that must finish
/// before a step may start under any dependency-respecting schedule.
class StepDag {
public:
    /// Builds the DAG from the producer/reader edges of every tensor (pinned ones included).
    /// Throws kiln::Error(kInternal) when a reader comes before its producer in step order.
    explicit StepDag(const PlanProblem& p);

    int num_steps() const { return n_; }
    /// Direct predecessors of `step` (sorted, unique).
    const std::vector<int>& predecessors(int step) const { return preds_[static_cast<size_t>(step)]; }
    /// True when `a` must finish before `b` starts (a is a strict ancestor of b).
    bool is_ancestor(int a, int b) const {
        if (a < 0 || b < 0) return a < 0 && b >= 0;  // "before the first step" precedes every step
        return (anc_[static_cast<size_t>(b) * words_ + static_cast<size_t>(a) / 64] >> (a % 64)) & 1;
    }

private:
    int n_ = 0;
    size_t words_ = 0;
    std::vector<std::vector<int>> preds_;
    std::vector<uint64_t> anc_;  // n_ rows of words_ words
};

/// All steps that touch tensor t: its producer (when >= 0) and its readers.
std::vector<int> tensor_uses(const PlanTensor& t);

}  // namespace kiln::plan
