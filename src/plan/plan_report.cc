// Plan figures. The lower bound is a sweep over steps: a tensor is live at every step of
// [producer, last reader]; at any step the live planned tensors need disjoint memory (the plan
// checker's invariant), so their total can not exceed any valid arena.
#include "plan/plan_report.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <vector>

namespace kiln::plan {
namespace {

int last_use(const PlanTensor& t) {
    int last = t.producer;
    for (int r : t.readers) last = std::max(last, r);
    return last;
}

}  // namespace

size_t naive_sum_bytes(const PlanProblem& p) {
    size_t sum = 0;
    for (const PlanTensor& t : p.tensors)
        if (!t.pinned) sum += t.bytes;
    return sum;
}

size_t lower_bound_bytes(const PlanProblem& p, const MemoryPlan& plan) {
    if (p.num_steps <= 0) return 0;
    // Difference array over steps: +bytes at the first counted step, -bytes after the last.
    std::vector<long long> delta(static_cast<size_t>(p.num_steps) + 1, 0);
    for (size_t t = 0; t < p.tensors.size(); ++t) {
        const PlanTensor& pt = p.tensors[t];
        if (pt.pinned || pt.producer < 0) continue;
        int first = pt.producer + (t < plan.inplace_source.size() && plan.inplace_source[t] >= 0 ? 1 : 0);
        int last = last_use(pt);
        if (first > last) continue;
        delta[static_cast<size_t>(first)] += static_cast<long long>(pt.bytes);
        delta[static_cast<size_t>(last) + 1] -= static_cast<long long>(pt.bytes);
    }
    long long live = 0, best = 0;
    for (int s = 0; s < p.num_steps; ++s) {
        live += delta[static_cast<size_t>(s)];
        best = std::max(best, live);
    }
    return static_cast<size_t>(best);
}

std::string plan_report(const PlanProblem& p, const MemoryPlan& plan, size_t top) {
    std::ostringstream os;
    size_t planned = 0;
    for (const PlanTensor& t : p.tensors) planned += t.pinned ? 0 : 1;
    os << "arena: " << plan.arena_bytes << "\n";
    os << "naive sum: " << naive_sum_bytes(p) << "\n";
    os << "lower bound: " << lower_bound_bytes(p, plan) << "\n";
    os << "in-place steps: " << plan.inplace_count << "\n";
    os << "planned tensors: " << planned << "\n";
    os << "placement order: " << plan.order << (plan.mode == PlanMode::kConcurrent ? " (concurrent)" : "") << "\n";
    std::vector<size_t> idx;
    for (size_t t = 0; t < p.tensors.size(); ++t)
        if (!p.tensors[t].pinned) idx.push_back(t);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p.tensors[a].bytes > p.tensors[b].bytes; });
    if (idx.size() > top) idx.resize(top);
    os << "largest tensors:\n";
    for (size_t t : idx) {
        const PlanTensor& pt = p.tensors[t];
        os << "  " << pt.name << "  " << pt.bytes << " bytes  steps " << pt.producer << ".." << last_use(pt)
           << "  offset " << plan.offsets[t];
        if (plan.inplace_source[t] >= 0) os << "  in place of '" << p.tensors[static_cast<size_t>(plan.inplace_source[t])].name << "'";
        os << "\n";
    }
    return os.str();
}

}  // namespace kiln::plan
