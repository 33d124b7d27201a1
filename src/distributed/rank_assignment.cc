// Rank assignment. The balanced split is the linear-partition dynamic programme: best[k][i], the
// smallest possible most-expensive stage when the first i nodes form k stages, is
// min over j < i of max(best[k-1][j], cost(j..i)). O(ranks * nodes^2), a few million steps
// for the largest test models.
//
// A fusion group (ir::Node::group, set by the whole graph's fuse-operators) is never cut: split
// between ranks, a conv and its epilogue would be different kernel units, and the kernel choice
// (kernels=auto decides per unit, by rule and an on-machine probe) and oneDNN's sum post-op
// (a residual Add inside the conv) would sum in another order than the whole model does. The
// balanced split cuts only between groups; an annotated group goes whole to the largest rank
// any of its nodes was given.
#include "distributed/rank_assignment.h"

#include <algorithm>
#include <limits>
#include <set>

#include "distributed/stage_cost.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

std::string stage_name(const ir::Node& n) {
    if (!n.name().empty()) return n.name();
    return n.num_outputs() > 0 ? n.output(0)->name() : std::string();
}

void check_rank(int r, int num_ranks, const std::string& what) {
    KILN_CHECK(r >= 0 && r < num_ranks, kInvalidArgument)
        << what << ": rank " << r << " is outside 0.." << num_ranks - 1 << " (" << num_ranks << " ranks)";
}

/// Whether every input of `n` is a constant (or omitted): the node goes with its consumers.
bool reads_only_constants(const ir::Node& n) {
    for (const ir::Value* v : n.inputs())
        if (v && !v->is_constant()) return false;
    return true;
}

/// Moves each fusion group whole to the largest rank among its nodes, then lets the nodes not
/// placed explicitly follow their producers again; repeats until nothing moves.
void keep_groups_whole(const std::vector<ir::Node*>& order, const std::set<const ir::Node*>& placed,
                       RankAssignment& a) {
    for (bool moved = true; moved;) {
        moved = false;
        std::map<int, int> group_rank;
        for (const ir::Node* n : order)
            if (n->group() >= 0) group_rank[n->group()] = std::max(group_rank[n->group()], a.rank.at(n));
        for (const ir::Node* n : order) {
            int r = n->group() >= 0 ? group_rank.at(n->group()) : a.rank.at(n);
            if (!placed.count(n))
                for (const ir::Value* v : n->inputs())
                    if (v && v->producer()) r = std::max(r, a.rank.at(v->producer()));
            moved |= r != a.rank.at(n);
            a.rank[n] = r;
        }
    }
}

}  // namespace

StageMap parse_stage_map(const std::vector<std::string>& pieces) {
    StageMap m;
    for (const std::string& piece : pieces) {
        size_t start = 0;
        while (start <= piece.size()) {
            size_t end = piece.find(',', start);
            if (end == std::string::npos) end = piece.size();
            std::string item = piece.substr(start, end - start);
            start = end + 1;
            if (item.empty()) continue;
            size_t eq = item.rfind('=');
            int rank = -1;
            bool ok = eq != std::string::npos && eq > 0 && eq + 1 < item.size();
            if (ok) {
                try {
                    size_t used = 0;
                    rank = std::stoi(item.substr(eq + 1), &used);
                    ok = used == item.size() - eq - 1 && rank >= 0;
                } catch (const std::exception&) {
                    ok = false;
                }
            }
            KILN_CHECK(ok, kInvalidArgument) << "--stage '" << item << "': expected NODE=RANK (RANK >= 0)";
            m[item.substr(0, eq)] = rank;
        }
    }
    return m;
}

RankAssignment assign_ranks_annotated(const ir::Graph& g, int num_ranks, const StageMap& stages) {
    KILN_CHECK(num_ranks >= 1, kInvalidArgument) << "partition: expected at least 1 rank, got " << num_ranks;
    RankAssignment a;
    a.num_ranks = num_ranks;
    std::map<std::string, bool> used;
    for (const auto& [name, r] : stages) used[name] = false;
    std::vector<ir::Node*> order = g.nodes();
    std::vector<ir::Node*> constant_only;
    std::set<const ir::Node*> placed;  // by the stage map or kiln.rank
    for (ir::Node* n : order) {
        auto it = stages.find(stage_name(*n));
        int r = -1;
        if (it != stages.end()) {
            used[it->first] = true;
            r = it->second;
            placed.insert(n);
        } else if (n->has_attr(kRankAttr)) {
            r = static_cast<int>(n->attr_int(kRankAttr, 0));
            placed.insert(n);
        } else if (reads_only_constants(*n)) {
            constant_only.push_back(n);
            continue;
        } else {
            r = 0;  // graph inputs are fed on every rank: they pin nothing
            for (const ir::Value* v : n->inputs())
                if (v && v->producer() && a.rank.count(v->producer())) r = std::max(r, a.rank.at(v->producer()));
        }
        check_rank(r, num_ranks, n->describe());
        a.rank[n] = r;
    }
    for (const auto& [name, hit] : used)
        KILN_CHECK(hit, kInvalidArgument) << "--stage '" << name << "': the graph has no node of that name (stages name the nodes "
                                   "of the rewritten graph, which `kiln inspect --partition` prints)";
    // Nodes of constants only, last to first so a chain of them follows its final consumer.
    for (auto it = constant_only.rbegin(); it != constant_only.rend(); ++it) {
        int r = num_ranks;
        for (const ir::Value* v : (*it)->outputs())
            for (const ir::Node* u : v->users())
                if (a.rank.count(u)) r = std::min(r, a.rank.at(u));
        a.rank[*it] = r == num_ranks ? 0 : r;
    }
    keep_groups_whole(order, placed, a);
    compute_stage_costs(g, a);
    return a;
}

RankAssignment assign_ranks_balanced(const ir::Graph& g, int num_ranks) {
    std::vector<ir::Node*> order = g.nodes();
    const int n = static_cast<int>(order.size());
    KILN_CHECK(num_ranks >= 1 && n >= num_ranks, kInvalidArgument)
        << "partition: cannot split " << n << " nodes into " << num_ranks << " non-empty stages";
    std::vector<double> prefix(n + 1, 0.0);
    for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + node_cost(*order[i]).seconds;
    // can_cut[j]: a stage may start at node j (no fusion group has nodes on both sides).
    std::vector<bool> can_cut(n + 1, true);
    std::map<int, std::pair<int, int>> span;  // group -> first, last position
    for (int i = 0; i < n; ++i)
        if (int grp = order[i]->group(); grp >= 0) {
            auto [it, fresh] = span.try_emplace(grp, i, i);
            it->second.second = i;
        }
    for (const auto& [grp, fl] : span)
        for (int j = fl.first + 1; j <= fl.second; ++j) can_cut[j] = false;
    const double inf = std::numeric_limits<double>::infinity();
    // best[k][i]: k stages over the first i nodes; cut[k][i]: where the last stage starts.
    std::vector<std::vector<double>> best(num_ranks + 1, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int>> cut(num_ranks + 1, std::vector<int>(n + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= num_ranks; ++k)
        for (int i = k; i <= n; ++i)
            for (int j = k - 1; j < i; ++j) {
                if (!can_cut[j]) continue;
                double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
                if (v < best[k][i]) {
                    best[k][i] = v;
                    cut[k][i] = j;
                }
            }
    KILN_CHECK(best[num_ranks][n] < inf, kInvalidArgument)
        << "partition: cannot split " << n << " nodes into " << num_ranks
        << " stages without cutting a fusion group (try fewer ranks, -O1, or --stage)";
    RankAssignment a;
    a.num_ranks = num_ranks;
    for (int k = num_ranks, i = n; k >= 1; --k) {
        int j = cut[k][i];
        for (int p = j; p < i; ++p) a.rank[order[p]] = k - 1;
        i = j;
    }
    compute_stage_costs(g, a);
    return a;
}

void compute_stage_costs(const ir::Graph& g, RankAssignment& a) {
    a.stage_seconds.assign(a.num_ranks, 0.0);
    for (const ir::Node* n : g.nodes()) a.stage_seconds[a.rank.at(n)] += node_cost(*n).seconds;
}

}  // namespace kiln::distributed
