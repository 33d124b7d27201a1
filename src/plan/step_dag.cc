// StepDag: edges producer -> reader of every tensor; ancestor bitsets in one pass over the steps
// in order (the step order is a topological order: a reader never precedes its producer), each
// step's set being the union of its predecessors' sets plus the predecessors themselves.
#include "plan/step_dag.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::plan {

std::vector<int> tensor_uses(const PlanTensor& t) {
    std::vector<int> u = t.readers;
    if (t.producer >= 0) u.push_back(t.producer);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    return u;
}

StepDag::StepDag(const PlanProblem& p) : n_(p.num_steps), words_((static_cast<size_t>(p.num_steps) + 63) / 64) {
    preds_.assign(static_cast<size_t>(n_), {});
    for (const PlanTensor& t : p.tensors) {
        KILN_ICHECK(t.producer >= -1 && t.producer < n_) << "tensor '" << t.name << "' has producer " << t.producer;
        for (int r : t.readers) {
            KILN_ICHECK(r >= 0 && r < n_) << "tensor '" << t.name << "' has reader step " << r;
            KILN_ICHECK(r > t.producer) << "tensor '" << t.name << "' is read at step " << r
                                        << " before (or by) its producer step " << t.producer;
            if (t.producer >= 0) preds_[static_cast<size_t>(r)].push_back(t.producer);
        }
    }
    anc_.assign(static_cast<size_t>(n_) * words_, 0);
    for (int s = 0; s < n_; ++s) {
        auto& ps = preds_[static_cast<size_t>(s)];
        std::sort(ps.begin(), ps.end());
        ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
        uint64_t* row = &anc_[static_cast<size_t>(s) * words_];
        for (int q : ps) {
            const uint64_t* prow = &anc_[static_cast<size_t>(q) * words_];
            for (size_t w = 0; w < words_; ++w) row[w] |= prow[w];
            row[static_cast<size_t>(q) / 64] |= uint64_t{1} << (q % 64);
        }
    }
}

}  // namespace kiln::plan
