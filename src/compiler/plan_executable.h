// Static memory planning of a compiled Executable: describes its buffers to the planner
// (src/plan), runs the plan checker, and writes arena offsets into the Executable.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/lower_group.h"
#include "ir/graph.h"
#include "op/op_def.h"
#include "plan/memory_plan.h"
#include "runtime/executable.h"

namespace kiln::compiler {

/// The plan of one executable and its figures.
struct ExecutablePlan {
    plan::PlanProblem problem;  // one tensor per buffer, in buffer order
    plan::MemoryPlan plan;
    size_t naive_sum = 0;
    size_t lower_bound = 0;
    std::string report;  // plan::plan_report
};

/// Plans every kIntermediate buffer of `exe` into one arena (sets BufferDesc::arena_offset and
/// Executable::arena_bytes). `inplace[s]` lists (output buffer, input buffer) pairs step s
/// may compute in place (the output may take the input's memory: LoweredKernel::inplace_inputs,
/// or an extern's residual); its kernel must be emitted with params_may_alias. Steps need StepDesc::num_inputs; a buffer written by a step whose
/// inputs are unknown, or by two steps, is left to its own allocation. `concurrent`: plan for
/// the dataflow executor. Executable::planned_for_concurrency is set when the plan is concurrent
/// or shares no memory at all. Verifies the plan with
/// plan::verify_plan (kInternal on a planner bug).
ExecutablePlan plan_executable(runtime::Executable& exe, const std::vector<std::vector<std::pair<int, int>>>& inplace,
                               bool concurrent);

}  // namespace kiln::compiler
