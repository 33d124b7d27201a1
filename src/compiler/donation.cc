#include "compiler/donation.h"

#include <algorithm>
#include <set>

namespace kiln::compiler {
namespace {

using runtime::BufferRole;

/// The step that writes buffer `b`, -1 when none does or several do (or one whose reads and
/// writes are unknown touches it).
int only_writer(const runtime::Executable& exe, int b) {
    int writer = -1;
    for (size_t s = 0; s < exe.steps.size(); ++s) {
        const runtime::StepDesc& st = exe.steps[s];
        for (size_t a = 0; a < st.args.size(); ++a) {
            if (st.args[a] != b) continue;
            if (st.num_inputs < 0) return -1;
            if (static_cast<int>(a) < st.num_inputs) continue;
            if (writer >= 0 && writer != static_cast<int>(s)) return -1;
            writer = static_cast<int>(s);
        }
    }
    return writer;
}

/// Whether every step other than `writer` that touches buffer `b` only reads it, before `writer`.
bool read_only_before(const runtime::Executable& exe, int b, int writer) {
    for (size_t s = 0; s < exe.steps.size(); ++s) {
        const runtime::StepDesc& st = exe.steps[s];
        if (static_cast<int>(s) == writer) continue;
        for (size_t a = 0; a < st.args.size(); ++a) {
            if (st.args[a] != b) continue;
            const bool reads_only = st.num_inputs >= 0 && static_cast<int>(a) < st.num_inputs;
            if (!reads_only || static_cast<int>(s) > writer) return false;
        }
    }
    return true;
}

}  // namespace

std::vector<std::pair<int, int>> verified_donations(const runtime::Executable& exe,
                                                    const std::vector<std::vector<std::pair<int, int>>>& writes_over,
                                                    const std::vector<std::pair<int, int>>& offers) {
    std::vector<std::pair<int, int>> kept;
    std::set<int> outputs_taken, inputs_taken;
    const int num_outputs = static_cast<int>(exe.outputs.size()), num_inputs = static_cast<int>(exe.inputs.size());
    for (const auto& [o, i] : offers) {
        if (o < 0 || o >= num_outputs || i < 0 || i >= num_inputs || outputs_taken.count(o) || inputs_taken.count(i))
            continue;
        const int out = exe.outputs[static_cast<size_t>(o)], in = exe.inputs[static_cast<size_t>(i)];
        const runtime::BufferDesc &ob = exe.buffers.at(static_cast<size_t>(out)), &ib = exe.buffers.at(static_cast<size_t>(in));
        if (ob.role != BufferRole::kOutput || ib.role != BufferRole::kInput || ob.dtype != ib.dtype ||
            ob.shape != ib.shape || ob.dim_of != ib.dim_of)
            continue;
        if (std::count(exe.outputs.begin(), exe.outputs.end(), out) != 1) continue;
        const int writer = only_writer(exe, out);
        if (writer < 0 || static_cast<size_t>(writer) >= writes_over.size()) continue;
        const auto& pairs = writes_over[static_cast<size_t>(writer)];
        if (std::find(pairs.begin(), pairs.end(), std::make_pair(out, in)) == pairs.end()) continue;
        if (!read_only_before(exe, in, writer)) continue;
        kept.emplace_back(o, i);
        outputs_taken.insert(o);
        inputs_taken.insert(i);
    }
    return kept;
}

}  // namespace kiln::compiler
