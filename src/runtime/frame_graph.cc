// build_frame_graph: one pass over the steps in their static (topological) order: a step's
// frame is that of its dynamic inputs, Enter opens (or re-enters) a child frame by name, Exit
// returns to the parent; then each NextIteration is matched with its Merge by (frame, slot).
#include "runtime/frame_graph.h"

#include <map>

#include "runtime/async_kernel.h"
#include "runtime/extern_kernel.h"

namespace kiln::runtime {
namespace {

Status bad(const StepDesc& s, const std::string& msg) {
    return Status(ErrorKind::kInvalidArgument, "node '" + s.node_name + "': " + msg);
}

StepKind kind_of(const KernelDesc& k) {
    if (k.control == "Enter") return StepKind::kEnter;
    if (k.control == "Exit") return StepKind::kExit;
    if (k.control == "Switch") return StepKind::kSwitch;
    if (k.control == "Merge") return StepKind::kMerge;
    if (k.control == "NextIteration") return StepKind::kNextIteration;
    return k.is_async ? StepKind::kCopy : StepKind::kKernel;
}

/// Expected (inputs, outputs) of a control step; (-1, -1) for kernels.
std::pair<int, int> control_arity(StepKind k, int num_inputs) {
    switch (k) {
        case StepKind::kSwitch:
            return {2, 2};
        case StepKind::kMerge:
            return {num_inputs == 2 ? 2 : 1, 1};
        case StepKind::kEnter:
        case StepKind::kExit:
        case StepKind::kNextIteration:
        case StepKind::kCopy:
            return {1, 1};
        default:
            return {-1, -1};
    }
}

/// Sets step s's frame from its inputs (fg.frame) and its outputs' frames (out_frame).
Status place_step(const Executable& exe, int s, FrameGraph& fg, std::vector<int>& out_frame,
                  std::map<std::string, int>& frame_ids) {
    const StepDesc& sd = exe.steps[s];
    const KernelDesc& kd = exe.kernels.at(static_cast<size_t>(sd.kernel));
    const StepKind k = kind_of(kd);
    fg.kind[s] = k;
    const int nin = sd.num_inputs < 0 ? static_cast<int>(sd.args.size()) : sd.num_inputs;
    auto [want_in, want_out] = control_arity(k, nin);
    if (want_in >= 0 && (nin != want_in || static_cast<int>(sd.args.size()) != want_in + want_out))
        return bad(sd, kd.description + " step has " + std::to_string(sd.args.size()) + " args, expected " +
                           std::to_string(want_in + want_out));
    int frame = -1;
    for (int i = 0; i < nin; ++i) {
        int b = sd.args[i];
        fg.readers[b].emplace_back(s, i);
        if (fg.producer[b] < 0) continue;
        ++fg.pending[s];
        if (frame >= 0 && out_frame[b] != frame)
            return bad(sd, "reads '" + exe.buffers[b].name + "' of frame '" + fg.frames[out_frame[b]].name +
                               "' and a value of frame '" + fg.frames[frame].name +
                               "' (a value enters a frame only through Enter and leaves it through Exit)");
        frame = out_frame[b];
    }
    fg.frame[s] = frame = frame < 0 ? 0 : frame;
    int outs = frame;
    if (k == StepKind::kEnter) {
        ExternParams p(kd.control_params);
        const std::string name = p.has("frame") ? p.str("frame") : "";
        auto [it, fresh] = frame_ids.emplace(name, static_cast<int>(fg.frames.size()));
        if (fresh) fg.frames.push_back({name, frame, 1, 0, 0, {}});
        FrameInfo& f = fg.frames[it->second];
        if (f.parent != frame)
            return bad(sd, "enters frame '" + name + "' from frame '" + fg.frames[frame].name +
                               "', but it was entered from '" + fg.frames[f.parent].name + "'");
        ++f.num_enters;
        f.parallel_iterations =
            std::max<int>(f.parallel_iterations, static_cast<int>(p.integer_or("parallel_iterations", 1)));
        f.max_iterations = std::max(f.max_iterations, p.integer_or("max_iterations", 0));
        fg.child[s] = outs = it->second;
        fg.constant[s] = p.integer_or("constant", 0) != 0;
    } else if (k == StepKind::kExit) {
        if (frame == 0) return bad(sd, "Exit in the root frame (no frame to leave)");
        fg.exit_index[s] = static_cast<int>(fg.frames[frame].exits.size());
        fg.frames[frame].exits.push_back(s);
        outs = fg.frames[frame].parent;
    }
    for (size_t i = static_cast<size_t>(nin); i < sd.args.size(); ++i) {
        fg.producer[sd.args[i]] = s;
        out_frame[sd.args[i]] = outs;
    }
    return Status::ok_status();
}

/// Links each NextIteration to the Merge of its (frame, slot) and sets Merges' arrival counts.
Status link_merges(const Executable& exe, FrameGraph& fg) {
    std::map<std::pair<std::string, int64_t>, int> merge_of;
    const int n = static_cast<int>(exe.steps.size());
    for (int s = 0; s < n; ++s) {
        if (fg.kind[s] != StepKind::kMerge) continue;
        ExternParams p(exe.kernels[exe.steps[s].kernel].control_params);
        if (exe.steps[s].num_inputs == 1)
            merge_of[{p.has("frame") ? p.str("frame") : "", p.integer_or("slot", -1)}] = s;
        // A loop Merge sees one arrival per iteration (Enter, then NextIteration); a join sees both.
        fg.pending[s] = exe.steps[s].num_inputs;
    }
    for (int s = 0; s < n; ++s) {
        if (fg.kind[s] != StepKind::kNextIteration) continue;
        ExternParams p(exe.kernels[exe.steps[s].kernel].control_params);
        const std::string frame = p.has("frame") ? p.str("frame") : "";
        auto it = merge_of.find({frame, p.integer_or("slot", -1)});
        if (it == merge_of.end())
            return bad(exe.steps[s], "NextIteration of frame '" + frame + "' slot " +
                                         std::to_string(p.integer_or("slot", -1)) + " has no Merge to feed");
        if (fg.frame[it->second] != fg.frame[s])
            return bad(exe.steps[s], "NextIteration runs in frame '" + fg.frames[fg.frame[s]].name +
                                         "' but its Merge '" + exe.steps[it->second].node_name + "' in frame '" +
                                         fg.frames[fg.frame[it->second]].name + "'");
        fg.merge[s] = it->second;
    }
    return Status::ok_status();
}

}  // namespace

Status build_frame_graph(const Executable& exe, FrameGraph& fg) {
    const size_t n = exe.steps.size(), nb = exe.buffers.size();
    fg = FrameGraph{};
    fg.kind.assign(n, StepKind::kKernel);
    fg.frame.assign(n, 0);
    fg.pending.assign(n, 0);
    fg.child.assign(n, -1);
    fg.constant.assign(n, false);
    fg.merge.assign(n, -1);
    fg.exit_index.assign(n, -1);
    fg.readers.assign(nb, {});
    fg.producer.assign(nb, -1);
    fg.frames.push_back({"", -1, 1, 0, 0, {}});
    std::vector<int> out_frame(nb, 0);
    std::map<std::string, int> frame_ids;
    for (size_t s = 0; s < n; ++s) {
        const StepDesc& sd = exe.steps[s];
        if (sd.kernel < 0 || static_cast<size_t>(sd.kernel) >= exe.kernels.size())
            return bad(sd, "names kernel " + std::to_string(sd.kernel));
        for (int b : sd.args)
            if (b < 0 || static_cast<size_t>(b) >= nb) return bad(sd, "names buffer " + std::to_string(b));
        const KernelDesc& kd = exe.kernels[sd.kernel];
        if (kd.is_async && kd.symbol != kAsyncCopySymbol)
            return bad(sd, "async kernel '" + kd.symbol + "' is not run by the frames executor");
        Status st = place_step(exe, static_cast<int>(s), fg, out_frame, frame_ids);
        if (!st.ok()) return st;
    }
    Status st = link_merges(exe, fg);
    if (!st.ok()) return st;
    for (size_t s = 0; s < n; ++s)
        if (fg.pending[s] == 0 && fg.frame[s] == 0) fg.roots.push_back(static_cast<int>(s));
    fg.reads.assign(nb, 0);
    for (size_t b = 0; b < nb; ++b)
        for (const auto& [s, slot] : fg.readers[b]) fg.reads[b] += fg.kind[s] != StepKind::kMerge;
    return Status::ok_status();
}

}  // namespace kiln::runtime
