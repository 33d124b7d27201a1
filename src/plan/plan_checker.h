// The plan checker: verifies a MemoryPlan against its problem from first principles.
#pragma once

#include <string>
#include <vector>

#include "plan/memory_plan.h"

namespace kiln::plan {

/// Every violation of `plan` as one line each (empty when the plan is valid):
/// - a planned tensor without a 64-byte-aligned offset inside the arena, or a pinned one with one;
/// - two planned tensors whose byte ranges overlap while they may be live at the same time
///   (plan.mode kSequential: overlapping lifetimes; kConcurrent: neither one's uses all being
///   strict ancestors of the other's producer), unless one legally took the other in place;
/// - an in-place pair that is not legal (not a candidate, different offsets, the source is
///   smaller, the source is still used after / concurrently with the producer, a source taken
///   twice).
std::vector<std::string> check_plan(const PlanProblem& p, const MemoryPlan& plan);

/// Throws kiln::Error(kInternal) listing the first violations when check_plan finds any.
void verify_plan(const PlanProblem& p, const MemoryPlan& plan);

}  // namespace kiln::plan
