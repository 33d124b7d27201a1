// Static memory planner (the arena planners of TFLite `simple_memory_arena` / TVM
// `static_plan_block_memory` / ggml-alloc, in one small function).
//
// 1. Lifetimes. A planned tensor lives from its producer step to its last reader step.
// 2. In place. Visiting tensors by producer step, a tensor takes the memory of one of its
//    `inplace_candidates` when that candidate is planned, at least as large, not already taken,
//    and dies at this producer: sequentially, its last use is this step; concurrently, every other
//    use of it is an ancestor of this step. Chains (Relu -> Sigmoid -> Tanh) merge into one block
//    whose size is the largest member and whose uses are all members' uses.
// 3. Placement. Blocks are placed one at a time at the best-fitting gap (the smallest gap that
//    holds it) between already placed blocks that conflict with it, or after the last of them.
//    Two orders are tried — largest first (TFLite) and by first use (TVM's greedy order) — and
//    the one giving the smaller arena is kept; largest first wins ties.
// Conflict: sequentially, overlapping lifetimes; concurrently, neither block's uses all being
// strict ancestors of the other block's first producer (plan/step_dag.h).
// NOTE: the in-place rule relies on the producer's kernel reading the candidate at exactly the
// index it writes (elementwise), so the compiler must only offer such candidates and must emit
// those kernels without `restrict` on their parameters.
#include "plan/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "plan/step_dag.h"
#include "support/error.h"

namespace kiln::plan {
namespace {

struct Block {
    size_t size = 0;        // aligned, max over members
    int first = 0, last = 0;
    int head_producer = 0;  // producer of the first member
    std::vector<int> uses;  // all members' uses, sorted
    int64_t offset = -1;
};

int last_use(const PlanTensor& t) {
    int last = t.producer;
    for (int r : t.readers) last = std::max(last, r);
    return last;
}

class Planner {
public:
    Planner(const PlanProblem& p, PlanMode mode) : p_(p), mode_(mode), dag_(p) {}

    MemoryPlan run() {
        const size_t n = p_.tensors.size();
        MemoryPlan plan;
        plan.mode = mode_;
        plan.offsets.assign(n, -1);
        plan.inplace_source.assign(n, -1);
        for (const PlanTensor& t : p_.tensors) {
            if (t.pinned) continue;
            KILN_ICHECK(t.producer >= 0) << "planned tensor '" << t.name << "' has no producer step";
        }
        resolve_inplace(plan);
        build_blocks(plan);

        std::vector<int> by_size(blocks_.size()), by_first(blocks_.size());
        std::iota(by_size.begin(), by_size.end(), 0);
        by_first = by_size;
        std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) {
            const Block &x = blocks_[a], &y = blocks_[b];
            return x.size != y.size ? x.size > y.size : x.first < y.first;
        });
        std::stable_sort(by_first.begin(), by_first.end(), [&](int a, int b) {
            const Block &x = blocks_[a], &y = blocks_[b];
            return x.first != y.first ? x.first < y.first : x.size > y.size;
        });
        std::vector<int64_t> off_size, off_first;
        size_t arena_size = place(by_size, off_size);
        size_t arena_first = place(by_first, off_first);
        bool first_wins = arena_first < arena_size;
        const std::vector<int64_t>& offs = first_wins ? off_first : off_size;
        plan.arena_bytes = first_wins ? arena_first : arena_size;
        plan.order = first_wins ? "first use" : "largest first";
        for (size_t t = 0; t < n; ++t)
            if (block_of_[t] >= 0) plan.offsets[t] = offs[static_cast<size_t>(block_of_[t])];
        return plan;
    }

private:
    bool dies_at(int c, int step) const {
        const PlanTensor& t = p_.tensors[static_cast<size_t>(c)];
        if (std::find(t.readers.begin(), t.readers.end(), step) == t.readers.end()) return false;
        if (mode_ == PlanMode::kSequential) return last_use(t) == step;
        for (int u : tensor_uses(t))
            if (u != step && !dag_.is_ancestor(u, step)) return false;
        return true;
    }

    void resolve_inplace(MemoryPlan& plan) {
        const size_t n = p_.tensors.size();
        std::vector<int> order;
        for (size_t t = 0; t < n; ++t)
            if (!p_.tensors[t].pinned) order.push_back(static_cast<int>(t));
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return p_.tensors[a].producer < p_.tensors[b].producer; });
        std::vector<bool> taken(n, false);
        for (int t : order) {
            const PlanTensor& pt = p_.tensors[static_cast<size_t>(t)];
            for (int c : pt.inplace_candidates) {
                KILN_ICHECK(c >= 0 && static_cast<size_t>(c) < n) << "tensor '" << pt.name << "' names in-place candidate " << c;
                const PlanTensor& ct = p_.tensors[static_cast<size_t>(c)];
                if (c == t || ct.pinned || taken[static_cast<size_t>(c)] || ct.bytes < pt.bytes) continue;
                if (!dies_at(c, pt.producer)) continue;
                taken[static_cast<size_t>(c)] = true;
                plan.inplace_source[static_cast<size_t>(t)] = c;
                ++plan.inplace_count;
                break;
            }
        }
    }

    void build_blocks(const MemoryPlan& plan) {
        const size_t n = p_.tensors.size();
        block_of_.assign(n, -1);
        // Tensors by producer: a chain's source is always produced before its in-place result.
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return p_.tensors[a].producer < p_.tensors[b].producer; });
        for (int t : order) {
            const PlanTensor& pt = p_.tensors[static_cast<size_t>(t)];
            if (pt.pinned) continue;
            int src = plan.inplace_source[static_cast<size_t>(t)];
            int b;
            if (src >= 0) {
                b = block_of_[static_cast<size_t>(src)];
                KILN_ICHECK(b >= 0) << "in-place source of '" << pt.name << "' is not placed before it";
            } else {
                b = static_cast<int>(blocks_.size());
                Block nb;
                nb.first = pt.producer;
                nb.last = pt.producer;
                nb.head_producer = pt.producer;
                blocks_.push_back(nb);
            }
            block_of_[static_cast<size_t>(t)] = b;
            Block& bl = blocks_[static_cast<size_t>(b)];
            bl.size = std::max(bl.size, align_up(pt.bytes));
            bl.last = std::max(bl.last, last_use(pt));
            for (int u : tensor_uses(pt)) bl.uses.push_back(u);
        }
        for (Block& bl : blocks_) {
            std::sort(bl.uses.begin(), bl.uses.end());
            bl.uses.erase(std::unique(bl.uses.begin(), bl.uses.end()), bl.uses.end());
        }
    }

    /// True when every use of a is a strict ancestor of b's first producer.
    bool precedes(const Block& a, const Block& b) const {
        for (int u : a.uses)
            if (!dag_.is_ancestor(u, b.head_producer)) return false;
        return true;
    }

    bool conflict(const Block& a, const Block& b) const {
        if (a.size == 0 || b.size == 0) return false;
        if (a.last < b.first || b.last < a.first) {
            if (mode_ == PlanMode::kSequential) return false;
            return !(precedes(a, b) || precedes(b, a));
        }
        return true;
    }

    size_t place(const std::vector<int>& order, std::vector<int64_t>& offsets) const {
        offsets.assign(blocks_.size(), -1);
        std::vector<int> placed;
        size_t arena = 0;
        std::vector<int> conflicts;
        for (int bi : order) {
            const Block& b = blocks_[static_cast<size_t>(bi)];
            if (b.size == 0) {
                offsets[static_cast<size_t>(bi)] = 0;
                continue;
            }
            conflicts.clear();
            for (int q : placed)
                if (conflict(b, blocks_[static_cast<size_t>(q)])) conflicts.push_back(q);
            std::sort(conflicts.begin(), conflicts.end(), [&](int x, int y) { return offsets[x] < offsets[y]; });
            size_t end = 0, best = 0, best_gap = SIZE_MAX;
            for (int q : conflicts) {
                size_t o = static_cast<size_t>(offsets[static_cast<size_t>(q)]);
                if (o > end && o - end >= b.size && o - end < best_gap) {
                    best_gap = o - end;
                    best = end;
                }
                end = std::max(end, o + blocks_[static_cast<size_t>(q)].size);
            }
            size_t at = best_gap != SIZE_MAX ? best : end;
            offsets[static_cast<size_t>(bi)] = static_cast<int64_t>(at);
            arena = std::max(arena, at + b.size);
            placed.push_back(bi);
        }
        return arena;
    }

    const PlanProblem& p_;
    PlanMode mode_;
    StepDag dag_;
    std::vector<Block> blocks_;
    std::vector<int> block_of_;
};

}  // namespace

MemoryPlan plan_memory(const PlanProblem& p, PlanMode mode) { return Planner(p, mode).run(); }

}  // namespace kiln::plan
