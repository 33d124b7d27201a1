// plan_executable: buffers -> plan::PlanTensor (producer = the step writing it, readers = the
// steps reading it; inputs, outputs and constants pinned), plan, check, write offsets.
#include "compiler/plan_executable.h"

#include "op/registry.h"

#include "plan/plan_checker.h"
#include "plan/plan_report.h"
#include "support/error.h"

namespace kiln::compiler {

using runtime::BufferRole;

ExecutablePlan plan_executable(runtime::Executable& exe, const std::vector<std::vector<std::pair<int, int>>>& inplace,
                               bool concurrent) {
    ExecutablePlan out;
    plan::PlanProblem& p = out.problem;
    const size_t nb = exe.buffers.size();
    p.num_steps = static_cast<int>(exe.steps.size());
    p.tensors.resize(nb);
    std::vector<int> writers(nb, 0);
    for (size_t i = 0; i < nb; ++i) {
        const runtime::BufferDesc& d = exe.buffers[i];
        p.tensors[i].name = d.name;
        p.tensors[i].bytes = d.nbytes();
        p.tensors[i].pinned = d.role != BufferRole::kIntermediate;
    }
    for (size_t s = 0; s < exe.steps.size(); ++s) {
        const runtime::StepDesc& st = exe.steps[s];
        int step = static_cast<int>(s);
        size_t nin = st.num_inputs < 0 ? st.args.size() : static_cast<size_t>(st.num_inputs);
        for (size_t a = 0; a < st.args.size(); ++a) {
            auto id = static_cast<size_t>(st.args[a]);
            KILN_ICHECK(id < nb) << "step " << s << " names buffer " << id;
            if (a < nin) {
                p.tensors[id].readers.push_back(step);
                if (st.num_inputs < 0) ++writers[id], p.tensors[id].pinned = true;  // unknown: keep apart
            } else {
                ++writers[id];
                p.tensors[id].producer = step;
            }
        }
    }
    for (size_t i = 0; i < nb; ++i) {
        plan::PlanTensor& t = p.tensors[i];
        if (writers[i] != 1 || t.producer < 0) t.pinned = true;
        // A reader at or before its producer (a buffer read and written by one step) stays out of
        // planning; the DAG only sees producer -> later reader edges.
        bool odd = false;
        for (int r : t.readers) odd |= r <= t.producer;
        if (odd) {
            t.pinned = true;
            std::vector<int> later;
            for (int r : t.readers)
                if (r > t.producer) later.push_back(r);
            t.readers = later;
        }
    }
    for (size_t s = 0; s < inplace.size() && s < exe.steps.size(); ++s)
        for (auto [o, in] : inplace[s]) {
            KILN_ICHECK(o >= 0 && static_cast<size_t>(o) < nb && in >= 0 && static_cast<size_t>(in) < nb)
                << "in-place pair (" << o << ", " << in << ") of step " << s;
            if (p.tensors[static_cast<size_t>(o)].producer == static_cast<int>(s))
                p.tensors[static_cast<size_t>(o)].inplace_candidates.push_back(in);
        }
    out.plan = plan::plan_memory(p, concurrent ? plan::PlanMode::kConcurrent : plan::PlanMode::kSequential);
    plan::verify_plan(p, out.plan);
    for (size_t i = 0; i < nb; ++i) exe.buffers[i].arena_offset = p.tensors[i].pinned ? -1 : out.plan.offsets[i];
    exe.arena_bytes = out.plan.arena_bytes;
    size_t aligned_sum = 0;
    for (const plan::PlanTensor& t : p.tensors)
        if (!t.pinned && t.bytes > 0) aligned_sum += plan::align_up(t.bytes);
    bool shares = out.plan.inplace_count > 0 || out.plan.arena_bytes < aligned_sum;
    exe.planned_for_concurrency = concurrent || !shares;
    out.naive_sum = plan::naive_sum_bytes(p);
    out.lower_bound = plan::lower_bound_bytes(p, out.plan);
    out.report = plan::plan_report(p, out.plan);
    return out;
}

}  // namespace kiln::compiler
