// Plan figures: naive sum, lower bound, and the text `kiln inspect --memory` prints.
#pragma once

#include <cstddef>
#include <string>

#include "plan/memory_plan.h"

namespace kiln::plan {

/// Sum of the bytes of every planned (non-pinned) tensor: the memory of one buffer each.
size_t naive_sum_bytes(const PlanProblem& p);

/// The largest total of planned tensor bytes live at one step of the order: a lower bound of
/// the arena of any valid plan with the same in-place decisions. A tensor computed in place of
/// another is not counted at its producer step (it occupies its source's bytes there).
size_t lower_bound_bytes(const PlanProblem& p, const MemoryPlan& plan);

/// One figure per line, in bytes: "arena: N", "naive sum: N", "lower bound: N", then
/// "in-place steps: K", "planned tensors: M", the placement order, and the `top` largest
/// planned tensors ("  NAME  BYTES bytes  steps A..B").
std::string plan_report(const PlanProblem& p, const MemoryPlan& plan, size_t top = 10);

}  // namespace kiln::plan
