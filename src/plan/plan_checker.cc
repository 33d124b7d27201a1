// Plan checker: pairwise over planned tensors (O(n^2), fine for thousands of tensors). It does
// not reuse the planner's blocks: lifetimes, liveness and in-place legality are recomputed
// from the problem, so a planner bug cannot hide behind its own bookkeeping.
#include "plan/plan_checker.h"

#include <algorithm>
#include <sstream>

#include "plan/step_dag.h"
#include "support/error.h"

namespace kiln::plan {
namespace {

int last_use(const PlanTensor& t) {
    int last = t.producer;
    for (int r : t.readers) last = std::max(last, r);
    return last;
}

/// True when every use of a is a strict ancestor of b's producer.
bool precedes(const StepDag& dag, const PlanTensor& a, const PlanTensor& b) {
    for (int u : tensor_uses(a))
        if (!dag.is_ancestor(u, b.producer)) return false;
    return true;
}

bool may_be_live_together(const StepDag& dag, PlanMode mode, const PlanTensor& a, const PlanTensor& b) {
    bool overlap = !(last_use(a) < b.producer || last_use(b) < a.producer);
    if (overlap || mode == PlanMode::kSequential) return overlap;
    return !(precedes(dag, a, b) || precedes(dag, b, a));
}

}  // namespace

std::vector<std::string> check_plan(const PlanProblem& p, const MemoryPlan& plan) {
    std::vector<std::string> bad;
    const size_t n = p.tensors.size();
    if (plan.offsets.size() != n || plan.inplace_source.size() != n) {
        bad.push_back("plan has " + std::to_string(plan.offsets.size()) + " offsets and " +
                      std::to_string(plan.inplace_source.size()) + " in-place entries for " + std::to_string(n) +
                      " tensors");
        return bad;
    }
    StepDag dag(p);
    auto name = [&](size_t t) { return "'" + p.tensors[t].name + "'"; };
    for (size_t t = 0; t < n; ++t) {
        const PlanTensor& pt = p.tensors[t];
        int64_t off = plan.offsets[t];
        if (pt.pinned) {
            if (off != -1) bad.push_back("pinned tensor " + name(t) + " has offset " + std::to_string(off));
            if (plan.inplace_source[t] != -1) bad.push_back("pinned tensor " + name(t) + " is computed in place");
            continue;
        }
        if (off < 0 || static_cast<size_t>(off) % kPlanAlignment != 0 ||
            static_cast<size_t>(off) + pt.bytes > plan.arena_bytes) {
            bad.push_back("tensor " + name(t) + " has offset " + std::to_string(off) + " (" + std::to_string(pt.bytes) +
                          " bytes): not 64-byte aligned inside the arena of " + std::to_string(plan.arena_bytes));
        }
    }
    // In-place pairs.
    std::vector<int> taken_by(n, -1);
    for (size_t t = 0; t < n; ++t) {
        int c = plan.inplace_source[t];
        if (c < 0 || p.tensors[t].pinned) continue;
        const PlanTensor& pt = p.tensors[t];
        if (static_cast<size_t>(c) >= n || p.tensors[static_cast<size_t>(c)].pinned) {
            bad.push_back("tensor " + name(t) + " is in place of an invalid or pinned tensor");
            continue;
        }
        const PlanTensor& ct = p.tensors[static_cast<size_t>(c)];
        const std::string pair = name(t) + " in place of " + name(static_cast<size_t>(c));
        if (std::find(pt.inplace_candidates.begin(), pt.inplace_candidates.end(), c) == pt.inplace_candidates.end())
            bad.push_back(pair + ": not an in-place candidate");
        if (plan.offsets[t] != plan.offsets[static_cast<size_t>(c)]) bad.push_back(pair + ": different offsets");
        if (ct.bytes < pt.bytes) bad.push_back(pair + ": the source is smaller");
        if (std::find(ct.readers.begin(), ct.readers.end(), pt.producer) == ct.readers.end())
            bad.push_back(pair + ": the producer does not read the source");
        for (int u : tensor_uses(ct)) {
            bool ok = u == pt.producer || (plan.mode == PlanMode::kSequential ? u < pt.producer
                                                                                : dag.is_ancestor(u, pt.producer));
            if (!ok) bad.push_back(pair + ": the source is still used at step " + std::to_string(u));
        }
        if (taken_by[static_cast<size_t>(c)] >= 0) bad.push_back(pair + ": the source was already taken in place");
        taken_by[static_cast<size_t>(c)] = static_cast<int>(t);
    }
    // Overlap of tensors that may be live together.
    std::vector<size_t> planned;
    for (size_t t = 0; t < n; ++t)
        if (!p.tensors[t].pinned && p.tensors[t].bytes > 0 && plan.offsets[t] >= 0) planned.push_back(t);
    for (size_t i = 0; i < planned.size(); ++i) {
        size_t a = planned[i];
        size_t a0 = static_cast<size_t>(plan.offsets[a]), a1 = a0 + p.tensors[a].bytes;
        for (size_t j = i + 1; j < planned.size(); ++j) {
            size_t b = planned[j];
            size_t b0 = static_cast<size_t>(plan.offsets[b]), b1 = b0 + p.tensors[b].bytes;
            if (a1 <= b0 || b1 <= a0) continue;
            if (plan.inplace_source[a] == static_cast<int>(b) || plan.inplace_source[b] == static_cast<int>(a)) continue;
            if (!may_be_live_together(dag, plan.mode, p.tensors[a], p.tensors[b])) continue;
            bad.push_back("tensors " + name(a) + " [" + std::to_string(a0) + ", " + std::to_string(a1) + ") and " +
                          name(b) + " [" + std::to_string(b0) + ", " + std::to_string(b1) +
                          ") overlap while both may be live");
        }
    }
    return bad;
}

void verify_plan(const PlanProblem& p, const MemoryPlan& plan) {
    std::vector<std::string> bad = check_plan(p, plan);
    if (bad.empty()) return;
    std::ostringstream os;
    os << "memory plan is invalid (" << bad.size() << " violations):";
    for (size_t i = 0; i < bad.size() && i < 8; ++i) os << "\n  " << bad[i];
    KILN_THROW(kInternal) << "bug in Kiln: " << os.str();
}

}  // namespace kiln::plan
