// The static memory planner: places every planned tensor of a step sequence in one arena by
// offset, reusing the memory of dead tensors and computing elementwise steps in place.
// IR-independent: the compiler describes tensors by size, producer step and reader steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::plan {

/// Every planned offset and the arena size are multiples of this.
constexpr size_t kPlanAlignment = 64;

/// One tensor of the problem. Steps are numbered in execution order (0..num_steps-1).
struct PlanTensor {
    std::string name;
    size_t bytes = 0;
    /// The step that writes it; -1 for a tensor that exists before the first step (an input or
    /// a constant). A planned tensor must have a producer.
    int producer = -1;
    /// The steps that read it (any order, duplicates allowed).
    std::vector<int> readers;
    /// Never placed in the arena (model inputs, outputs, constants); still used for step
    /// dependencies.
    bool pinned = false;
    /// Tensors the producer reads elementwise (same index as this output, at least as many
    /// bytes): this tensor may take one's memory if that tensor dies at the producer.
    std::vector<int> inplace_candidates;
};

struct PlanProblem {
    int num_steps = 0;
    std::vector<PlanTensor> tensors;
};

/// kSequential: the steps run in their order, one at a time; two tensors may share memory when
/// their lifetimes [producer, last reader] are disjoint. kConcurrent: the steps may run in any
/// order that respects their data dependencies; two tensors may share memory only when every
/// use of one is an ancestor of the producer of the other in the step DAG.
enum class PlanMode { kSequential, kConcurrent };

struct MemoryPlan {
    PlanMode mode = PlanMode::kSequential;
    size_t arena_bytes = 0;
    /// Per tensor: byte offset in the arena, or -1 for a pinned tensor.
    std::vector<int64_t> offsets;
    /// Per tensor: the tensor whose memory it took in place, or -1.
    std::vector<int> inplace_source;
    /// Number of tensors computed in place.
    int inplace_count = 0;
    /// The placement order that gave the smaller arena: "largest first" or "first use".
    std::string order;
};

/// Plans `p`. Throws kiln::Error(kInternal) on an inconsistent problem (a planned tensor with no
/// producer, a reader before the producer, ids out of range).
MemoryPlan plan_memory(const PlanProblem& p, PlanMode mode = PlanMode::kSequential);

/// Rounds up to kPlanAlignment.
inline size_t align_up(size_t bytes) { return (bytes + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment; }

}  // namespace kiln::plan
