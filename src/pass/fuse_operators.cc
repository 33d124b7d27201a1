#include "pass/fuse_operators.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "op/registry.h"
#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

using op::OpPattern;

bool is_float32_training_batch_norm(const ir::Node& n);

struct FusionGraph {
    std::vector<ir::Node*> nodes;
    std::vector<OpPattern> pattern;
    std::vector<std::vector<int>> users;  // distinct user node indices
    std::vector<int> ipdom;               // immediate post-dominator, -1 = the root
    std::vector<int> depth;               // in the post-dominator tree (root = 0)
    std::vector<bool> external;           // writes a graph output

    explicit FusionGraph(const ir::Graph& g) {
        nodes = g.nodes();
        std::unordered_map<const ir::Node*, int> index;
        for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = static_cast<int>(i);
        const op::OpRegistry& reg = op::OpRegistry::global();
        std::unordered_set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
        const int n = static_cast<int>(nodes.size());
        users.resize(n);
        pattern.resize(n, OpPattern::kOpaque);
        external.assign(n, false);
        for (int i = 0; i < n; ++i) {
            const op::OpDef* def = reg.find(nodes[i]->op());
            if (def) pattern[i] = def->pattern;
            // A float32 training-mode BatchNormalization reduces over the batch: one kernel of its
            // own (the runtime's kiln_bn_train, runtime/batchnorm_training_kernel.h).
            if (is_float32_training_batch_norm(*nodes[i])) pattern[i] = OpPattern::kOpaque;
            for (const ir::Value* o : nodes[i]->outputs()) {
                external[i] = external[i] || outputs.count(o) > 0;
                for (const ir::Node* u : o->users()) {
                    int ui = index.at(u);
                    if (std::find(users[i].begin(), users[i].end(), ui) == users[i].end()) users[i].push_back(ui);
                }
            }
        }
        ipdom.assign(n, -1);
        depth.assign(n, 1);
        // A graph output is materialized, so its producer ends a group, except an injective
        // producer whose output is also read in the graph (a training step's updated optimizer
        // state, which the parameter update reads): it may join its users' group as one more
        // output of that kernel, instead of a kernel and a round trip through memory of its own.
        for (int i = n - 1; i >= 0; --i) {
            if ((external[i] && pattern[i] > OpPattern::kInjective) || users[i].empty()) continue;
            int lca = users[i][0];
            for (size_t k = 1; k < users[i].size() && lca >= 0; ++k) lca = common_ancestor(lca, users[i][k]);
            ipdom[i] = lca;
            depth[i] = lca >= 0 ? depth[lca] + 1 : 1;
        }
    }

    int common_ancestor(int a, int b) const {
        while (a != b) {
            if (a < 0 || b < 0) return -1;
            if (depth[a] < depth[b]) std::swap(a, b);
            a = ipdom[a];
        }
        return a;
    }
};

/// Union-find over nodes; the root of a set keeps the group's facts.
struct Groups {
    std::vector<int> parent;
    std::vector<OpPattern> pattern;  // combined (max) pattern of the set
    std::vector<int> anchors, size;

    explicit Groups(const FusionGraph& fg) : parent(fg.nodes.size()), pattern(fg.pattern), anchors(fg.nodes.size()), size(fg.nodes.size(), 1) {
        for (size_t i = 0; i < parent.size(); ++i) {
            parent[i] = static_cast<int>(i);
            anchors[i] = op::is_fusion_anchor(fg.pattern[i]) ? 1 : 0;
        }
    }
    int find(int x) {
        while (parent[x] != x) x = parent[x] = parent[parent[x]];
        return x;
    }
    void merge(int from, int into) {
        from = find(from);
        into = find(into);
        if (from == into) return;
        parent[from] = into;
        pattern[into] = std::max(pattern[into], pattern[from]);
        anchors[into] += anchors[from];
        size[into] += size[from];
    }
};

using PathCondition = std::function<bool(OpPattern p, bool is_sink)>;

/// Nodes strictly between src and sink (sink post-dominates src); false when one fails `cond`.
bool collect_path(const FusionGraph& fg, int src, int sink, const PathCondition& cond, std::vector<int>& between) {
    std::unordered_set<int> seen;
    std::vector<int> stack(fg.users[src].begin(), fg.users[src].end());
    while (!stack.empty()) {
        int v = stack.back();
        stack.pop_back();
        if (!seen.insert(v).second) continue;
        if (v == sink) {
            if (!cond(fg.pattern[v], true)) return false;
            continue;
        }
        if (!cond(fg.pattern[v], false)) return false;
        between.push_back(v);
        for (int u : fg.users[v]) stack.push_back(u);
    }
    return seen.count(sink) > 0;
}

bool try_fuse(const FusionGraph& fg, Groups& groups, int src, int sink, const PathCondition& cond) {
    std::vector<int> between;
    if (!collect_path(fg, src, sink, cond, between)) return false;
    std::unordered_set<int> roots = {groups.find(src), groups.find(sink)};
    for (int v : between) roots.insert(groups.find(v));
    int anchors = 0, size = 0;
    for (int r : roots) {
        anchors += groups.anchors[r];
        size += groups.size[r];
    }
    if (anchors > 1 || size > kMaxGroupSize) return false;
    // A recomputed copy never joins a group with the forward nodes (pass/rewrite.h).
    const bool recomputed = is_recomputation(*fg.nodes[src]);
    if (is_recomputation(*fg.nodes[sink]) != recomputed) return false;
    for (int v : between)
        if (is_recomputation(*fg.nodes[v]) != recomputed) return false;
    for (int v : between) groups.merge(v, sink);
    groups.merge(src, sink);
    return true;
}

bool is_float32_training_batch_norm(const ir::Node& n) {
    return n.op() == "BatchNormalization" && n.attr_int("training_mode", 0) != 0 &&
           n.input(0)->type().dtype == DType::kFloat32;
}

/// A float32 training-mode BatchNormalization whose Y only a ReLU reads (Y no graph output),
/// both alone in their groups, takes the ReLU into its kernel (kiln_bn_train writes max(Y, 0)
/// in its second pass; the ReLU's gradient masks with its output, so nothing else reads Y).
void fold_relu_into_batch_norm(const ir::Graph& g, const FusionGraph& fg, Groups& groups) {
    std::unordered_map<const ir::Node*, int> index;
    for (size_t i = 0; i < fg.nodes.size(); ++i) index[fg.nodes[i]] = static_cast<int>(i);
    for (size_t i = 0; i < fg.nodes.size(); ++i) {
        const ir::Node& bn = *fg.nodes[i];
        if (!is_float32_training_batch_norm(bn) || is_graph_output(g, bn.output(0))) continue;
        const std::vector<ir::Node*>& users = bn.output(0)->users();
        if (users.size() != 1 || users[0]->op() != "Relu" || is_recomputation(bn) != is_recomputation(*users[0]))
            continue;
        const int bi = static_cast<int>(i), ri = index.at(users[0]);
        if (groups.size[groups.find(bi)] != 1 || groups.size[groups.find(ri)] != 1) continue;
        groups.merge(bi, ri);
    }
}

/// A blocked-to-plain transpose whose output a Reshape or Flatten merges into fewer axes (a
/// detector's heads flatten each map, concatenate and take a sigmoid). Fused with them, every
/// element of a merged row reads its own blocked cache line and the math after the strided loads
/// stayed scalar (YOLO's heads: 1.45 ms, 20% of the model); alone, the transpose takes its
/// channel-tiled schedule and the rest reads plain rows (0.16 ms + 0.1). Such a node fuses only
/// with elementwise consumers; others (a channel Concat, ShuffleNet's shuffle) still fuse: an
/// extra kernel costs more than their reads.
bool flattened_from_blocked(const ir::Node& n) {
    if (n.op() != "KilnLayoutFromBlocked") return false;
    for (const ir::Node* u : n.output(0)->users())
        if ((u->op() == "Reshape" || u->op() == "Flatten") && u->output(0)->type().rank() < n.output(0)->type().rank())
            return true;
    return false;
}

/// A Transpose that moves the input's contiguous axis, read by a Reshape or Flatten (the
/// attention's head merge of a transposed key gradient, [8, 12, 64, 128] -> [8, 128, 12, 64] ->
/// [1024, 768]). Fused, its stage is inlined into the Reshape's and takes the default rows, each
/// element gathered from another line; alone, it takes its 16 x 16 tiles (transpose_schedule,
/// codegen/transpose_tiles.h) and the Reshape is a view. It fuses only with elementwise consumers.
bool transpose_into_reshape(const ir::Node& n) {
    if (n.op() != "Transpose" || !n.input(0) || n.input(0)->type().rank() < 2) return false;
    const std::vector<int64_t> perm = n.attr_ints("perm");
    const int64_t last = n.input(0)->type().rank() - 1;
    if (!perm.empty() && perm.back() == last) return false;  // the contiguous axis stays last
    for (const ir::Node* u : n.output(0)->users())
        if (u->op() == "Reshape" || u->op() == "Flatten") return true;
    return false;
}

/// A plain-to-blocked transpose that would join a conv's or product's group through its epilogue
/// (a residual Add whose other side arrives plain: SD's UNet block adds its input after the last
/// conv). Inlined there, the group is no longer a oneDNN convolution with a sum post-op but a
/// generated one (15 ms against 6.7 for [320, 32, 32] 3x3); alone, the transpose is one pass.
bool blocked_into_anchor_epilogue(const ir::Node& n, Groups& groups, int sink) {
    return n.op() == "KilnLayoutToBlocked" && groups.anchors[groups.find(sink)] > 0;
}

}  // namespace

bool fuse_operators(ir::Graph& g, const PassContext&) {
    FusionGraph fg(g);
    Groups groups(fg);
    const int n = static_cast<int>(fg.nodes.size());
    auto elemwise_path = [](OpPattern p, bool) { return p <= OpPattern::kBroadcast; };
    auto prologue_path = [](OpPattern p, bool is_sink) {
        return p <= OpPattern::kInjective || (is_sink && p == OpPattern::kCommReduce);
    };
    auto injective_path = [](OpPattern p, bool) { return p <= OpPattern::kInjective; };
    for (int i = 0; i < n; ++i) {
        int sink = fg.ipdom[i];
        if (fg.pattern[i] == OpPattern::kOpaque || sink < 0) continue;
        if (groups.find(i) == groups.find(sink)) continue;
        const OpPattern gp = groups.pattern[groups.find(i)];
        if (op::is_fusion_anchor(gp))
            try_fuse(fg, groups, i, sink, elemwise_path);
        else if (gp <= OpPattern::kBroadcast)
            try_fuse(fg, groups, i, sink, prologue_path);
        else if (gp == OpPattern::kInjective) {
            if (blocked_into_anchor_epilogue(*fg.nodes[i], groups, sink)) continue;
            const bool alone = flattened_from_blocked(*fg.nodes[i]) || transpose_into_reshape(*fg.nodes[i]);
            try_fuse(fg, groups, i, sink, alone ? elemwise_path : injective_path);
        }
    }
    fold_relu_into_batch_norm(g, fg, groups);
    // Number the groups of two or more nodes in order of their first node.
    std::map<int, int> id_of_root;
    bool changed = false;
    for (int i = 0; i < n; ++i) {
        int r = groups.find(i);
        int id = -1;
        if (groups.size[r] > 1) id = id_of_root.emplace(r, static_cast<int>(id_of_root.size())).first->second;
        changed |= fg.nodes[i]->group() != id;
        fg.nodes[i]->set_group(id);
    }
    return changed;
}

}  // namespace kiln::pass
