#include "distributed/partition.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "distributed/stage_cost.h"
#include "ir/printer.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

/// The first edge seen from rank a to rank b, for naming a cycle.
struct RankEdge {
    const ir::Node* producer = nullptr;
    const ir::Node* consumer = nullptr;
};

class Splitter {
public:
    Splitter(const ir::Graph& g, const RankAssignment& a, uint64_t incarnation)
        : g_(g), a_(a), incarnation_(incarnation), local_(a.num_ranks) {
        p_.ranks.resize(a.num_ranks);
        for (int r = 0; r < a.num_ranks; ++r) {
            p_.ranks[r].rank = r;
            p_.ranks[r].graph.name = g.name + "_rank" + std::to_string(r);
            p_.ranks[r].estimated_seconds = r < static_cast<int>(a.stage_seconds.size()) ? a.stage_seconds[r] : 0;
        }
    }

    Partition run() {
        for (const ir::Node* n : g_.nodes()) copy_node(*n);
        for (ir::Value* v : g_.outputs()) {
            int r = v->producer() ? a_.rank.at(v->producer()) : 0;
            p_.ranks[r].graph.add_output(local(r, v, nullptr));
            p_.outputs.push_back({r, v->name()});
        }
        p_.run_order = rank_order();
        return std::move(p_);
    }

private:
    /// `v` as seen on rank r: a copied constant, a fed graph input, the rank's own value, or the
    /// output of the one KilnRecv of (v, r), made on first use. `consumer` names cycle edges.
    ir::Value* local(int r, ir::Value* v, const ir::Node* consumer) {
        auto it = local_[r].find(v);
        if (it != local_[r].end()) return it->second;
        ir::Graph& gr = p_.ranks[r].graph;
        ir::Value* out = nullptr;
        if (v->is_constant()) {
            out = gr.add_constant(v->name(), v->constant());
        } else if (v->is_graph_input()) {
            out = gr.add_input(v->name(), v->type());
        } else {
            KILN_CHECK(v->producer(), kUnsupported) << "partition: value '" << v->name() << "' has no producer in the graph";
            int src = a_.rank.at(v->producer());
            KILN_CHECK(src != r, kInternal) << "bug in Kiln: partition reached '" << v->name() << "' before its producer";
            TransferKey key{src, incarnation_, r, v->name(), 0, 0, /*step=*/-1};  // the step is set per run
            ir::Value* sent = local_[src].at(v);
            ir::AttrMap send_attrs{{"key", key.to_string()}, {"to", int64_t{r}}};
            p_.ranks[src].graph.add_node("KilnSend", {sent}, send_attrs, {}, {}, "send/" + v->name() + "/to" + std::to_string(r));
            ir::AttrMap recv_attrs{{"key", key.to_string()}, {"from", int64_t{src}}};
            out = gr.add_node("KilnRecv", {}, recv_attrs, {v->type()}, {v->name()}, "recv/" + v->name())->output(0);
            p_.transfers.push_back({key, v->type(), type_bytes(v->type())});
            auto& e = edges_[{src, r}];
            if (!e.producer) e = {v->producer(), consumer};
        }
        local_[r][v] = out;
        return out;
    }

    void copy_node(const ir::Node& n) {
        int r = a_.rank.at(&n);
        // Values a sub-graph (If/Loop/Scan body) reads from this scope by name must be here too.
        for (const auto& [name, attr] : n.attrs())
            if (const auto* sub = std::get_if<ir::GraphAttr>(&attr))
                for (const ir::Value* outer : (*sub)->outer_inputs())
                    if (ir::Value* v = g_.find_value(outer->name())) local(r, v, &n);
        std::vector<ir::Value*> ins;
        for (ir::Value* v : n.inputs()) ins.push_back(v ? local(r, v, &n) : nullptr);
        ir::AttrMap attrs = n.attrs();
        attrs.erase(kRankAttr);
        std::vector<ir::TensorType> types;
        std::vector<std::string> names;
        for (const ir::Value* v : n.outputs()) {
            types.push_back(v->type());
            names.push_back(v->name());
        }
        ir::Node* copy = p_.ranks[r].graph.add_node(n.op(), ins, std::move(attrs), types, names, n.name());
        copy->set_role(n.role());
        for (size_t i = 0; i < n.num_outputs(); ++i) local_[r][n.output(i)] = copy->output(i);
    }

    /// Kahn's order of the rank DAG; a cycle is an error naming one edge of each hop.
    std::vector<int> rank_order() const {
        const int n = a_.num_ranks;
        std::vector<int> indegree(n, 0), order;
        for (const auto& [e, _] : edges_) ++indegree[e.second];
        for (int r = 0; r < n; ++r)
            if (indegree[r] == 0) order.push_back(r);
        for (size_t i = 0; i < order.size(); ++i)
            for (const auto& [e, _] : edges_)
                if (e.first == order[i] && --indegree[e.second] == 0) order.push_back(e.second);
        if (static_cast<int>(order.size()) != n) throw_cycle(indegree);
        return order;
    }

    [[noreturn]] void throw_cycle(const std::vector<int>& indegree) const {
        // Walk back along edges between ranks left with indegree > 0 until a rank repeats.
        int r = 0;
        while (indegree[r] == 0) ++r;
        std::vector<int> path{r};
        while (true) {
            int prev = -1;
            for (const auto& [e, _] : edges_)
                if (e.second == path.back() && indegree[e.first] > 0) prev = e.first;
            size_t seen = std::find(path.begin(), path.end(), prev) - path.begin();
            path.push_back(prev);
            if (seen + 1 < path.size()) {  // prev was on the path already: the cycle is path[seen..]
                path.erase(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(seen));
                break;
            }
        }
        std::reverse(path.begin(), path.end());
        std::ostringstream os;
        os << "partition: the ranks form a cycle (each rank runs its graph whole, so ranks must form a pipeline): ";
        for (size_t i = 0; i + 1 < path.size(); ++i) {
            const RankEdge& e = edges_.at({path[i], path[i + 1]});
            os << (i ? "; " : "") << e.producer->describe() << " on rank " << path[i] << " feeds "
               << (e.consumer ? e.consumer->describe() : std::string("an output")) << " on rank " << path[i + 1];
        }
        os << ". Place these nodes so data flows one way between ranks";
        KILN_THROW(kInvalidArgument) << os.str();
    }

    const ir::Graph& g_;
    const RankAssignment& a_;
    uint64_t incarnation_;
    Partition p_;
    std::vector<std::map<const ir::Value*, ir::Value*>> local_;  // per rank: whole-graph value -> local
    std::map<std::pair<int, int>, RankEdge> edges_;
};

}  // namespace

Partition partition_graph(const ir::Graph& g, const RankAssignment& a, uint64_t incarnation) {
    for (const ir::Node* n : g.nodes())
        KILN_CHECK(a.rank.count(n), kInternal) << "bug in Kiln: " << n->describe() << " has no rank";
    return Splitter(g, a, incarnation).run();
}

std::string partition_report(const Partition& p) {
    std::ostringstream os;
    ir::PrintOptions popts;
    popts.max_constant_elements = 16;
    for (const RankGraph& r : p.ranks) {
        os << "// rank " << r.rank << ": " << r.graph.num_nodes() << " nodes, estimated cost "
           << r.estimated_seconds * 1e3 << " ms (roofline, distributed/stage_cost.h)\n";
        os << ir::print_graph(r.graph, popts) << "\n";
    }
    int64_t total = 0;
    os << "// transfers: type, bytes, key (src/incarnation -> dst 'tensor' frame F:I; the step is set per run)\n";
    for (const Transfer& t : p.transfers) {
        os << "transfer " << t.type.str() << " " << t.bytes << " bytes: " << t.key.to_string() << "\n";
        total += t.bytes;
    }
    os << "// " << p.transfers.size() << " transfers, " << total << " bytes per step; stage costs:";
    for (const RankGraph& r : p.ranks) os << " " << r.estimated_seconds * 1e3 << " ms";
    os << "\n";
    return os.str();
}

}  // namespace kiln::distributed
