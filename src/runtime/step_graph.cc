// StepGraph construction: one pass over the steps in static order tracking, per buffer, its last
// writer and the readers since then. Edges are deduplicated per step; a step never depends on
// itself (an arg listed twice).
#include "runtime/step_graph.h"

#include <algorithm>
#include <map>

namespace kiln::runtime {

StepGraph build_step_graph(const Executable& exe) {
    const size_t n = exe.steps.size();
    StepGraph g;
    g.consumers.resize(n);
    g.num_deps.assign(n, 0);
    g.level.assign(n, 0);
    std::vector<int> last_writer(exe.buffers.size(), -1);
    std::vector<std::vector<int>> readers(exe.buffers.size());
    // A donated output's writer may write over its input: it waits for the input's readers too.
    std::vector<int> donated_from(exe.buffers.size(), -1);
    for (const auto& [o, i] : exe.donations)
        if (o >= 0 && static_cast<size_t>(o) < exe.outputs.size() && i >= 0 && static_cast<size_t>(i) < exe.inputs.size())
            donated_from.at(static_cast<size_t>(exe.outputs[o])) = exe.inputs[i];
    std::vector<int> deps;
    for (size_t s = 0; s < n; ++s) {
        const StepDesc& st = exe.steps[s];
        const int ni = st.num_inputs < 0 ? -1 : st.num_inputs;
        deps.clear();
        for (size_t i = 0; i < st.args.size(); ++i) {
            int b = st.args[i];
            if (b < 0 || static_cast<size_t>(b) >= exe.buffers.size()) continue;  // BufferTable reports it
            bool reads = ni < 0 || static_cast<int>(i) < ni;
            bool writes = ni < 0 || static_cast<int>(i) >= ni;
            if (last_writer[b] >= 0) deps.push_back(last_writer[b]);
            if (writes) deps.insert(deps.end(), readers[b].begin(), readers[b].end());
            if (writes && donated_from[b] >= 0) {
                const auto& over = readers[static_cast<size_t>(donated_from[b])];
                deps.insert(deps.end(), over.begin(), over.end());
            }
            (void)reads;
        }
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        for (int d : deps) {
            if (d == static_cast<int>(s)) continue;
            g.consumers[d].push_back(static_cast<int>(s));
            g.num_deps[s]++;
            g.level[s] = std::max(g.level[s], g.level[d] + 1);
        }
        if (g.num_deps[s] == 0) g.roots.push_back(static_cast<int>(s));
        // Record this step's accesses after computing its dependencies.
        for (size_t i = 0; i < st.args.size(); ++i) {
            int b = st.args[i];
            if (b < 0 || static_cast<size_t>(b) >= exe.buffers.size()) continue;
            bool writes = ni < 0 || static_cast<int>(i) >= ni;
            if (writes) {
                last_writer[b] = static_cast<int>(s);
                readers[b].clear();
            } else {
                readers[b].push_back(static_cast<int>(s));
            }
        }
    }
    return g;
}

int parallel_width(const Executable& exe, const StepGraph& g, double min_flops) {
    std::map<int, int> per_level;
    int width = 0;
    for (size_t s = 0; s < exe.steps.size(); ++s)
        if (exe.steps[s].flops >= min_flops) width = std::max(width, ++per_level[g.level[s]]);
    return width;
}

}  // namespace kiln::runtime
