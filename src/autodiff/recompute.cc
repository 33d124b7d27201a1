#include "autodiff/recompute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autodiff/differentiate.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

size_t value_bytes(const ir::Value* v) {
    const ir::TensorType& t = v->type();
    if (!t.is_tensor() || !t.is_static()) return 0;
    int64_t n = 1;
    for (int64_t d : t.static_shape()) n *= d;
    return static_cast<size_t>(n) * dtype_size(t.dtype);
}

bool never_copied(const ir::Node& n) { return pass::is_random_op(n.op()) || n.op() == "Dropout"; }

/// The graph split into its forward nodes (in segments) and the rest (backward, optimizer).
struct Split {
    std::vector<ir::Node*> forward, rest;
    std::unordered_map<const ir::Node*, int> segment;  // forward node -> segment
    int segments = 0;
};

Split split(const ir::Graph& g, int segment_nodes) {
    Split s;
    std::unordered_set<const ir::Node*> after;  // backward nodes and everything reading them
    for (ir::Node* n : g.nodes()) {
        bool post = is_backward_node(*n);
        for (const ir::Value* in : n->inputs()) post = post || (in && in->producer() && after.count(in->producer()));
        if (post) {
            after.insert(n);
            s.rest.push_back(n);
        } else {
            s.forward.push_back(n);
        }
    }
    const int f = static_cast<int>(s.forward.size());
    const int per = segment_nodes > 0 ? segment_nodes : std::max(1, static_cast<int>(std::ceil(std::sqrt(f))));
    for (int i = 0; i < f; ++i) s.segment[s.forward[i]] = i / per;
    s.segments = f == 0 ? 0 : (f + per - 1) / per;
    return s;
}

/// Which forward nodes get copies: per recomputed segment, the producers of the values the
/// backward pass reads, closed over their same-segment inputs, minus checkpoints and random ops.
struct CopyPlan {
    std::vector<std::vector<ir::Node*>> copies;     // per segment, in forward order
    std::unordered_set<const ir::Node*> copied;     // all copied nodes
};

CopyPlan plan_copies(const Split& s, const std::vector<bool>& recomputed) {
    std::unordered_set<const ir::Node*> rest(s.rest.begin(), s.rest.end());
    // A checkpoint: a forward value read by a forward node of a later segment.
    auto is_checkpoint = [&](const ir::Value* v) {
        const int seg = s.segment.at(v->producer());
        for (const ir::Node* u : v->users()) {
            auto it = s.segment.find(u);
            if (it != s.segment.end() && it->second > seg) return true;
        }
        return false;
    };
    CopyPlan plan;
    plan.copies.resize(s.segments);
    std::vector<const ir::Node*> stack;
    for (ir::Node* n : s.forward) {
        const int seg = s.segment.at(n);
        if (!recomputed[seg] || never_copied(*n)) continue;
        for (const ir::Value* o : n->outputs()) {
            bool read_by_rest = false;
            for (const ir::Node* u : o->users()) read_by_rest = read_by_rest || rest.count(u);
            if (read_by_rest && !is_checkpoint(o)) stack.push_back(n);
        }
    }
    while (!stack.empty()) {
        const ir::Node* n = stack.back();
        stack.pop_back();
        if (!plan.copied.insert(n).second) continue;
        const int seg = s.segment.at(n);
        for (const ir::Value* in : n->inputs()) {
            if (!in || !in->producer()) continue;
            auto it = s.segment.find(in->producer());
            if (it == s.segment.end() || it->second != seg) continue;
            if (never_copied(*in->producer()) || is_checkpoint(in)) continue;
            stack.push_back(in->producer());
        }
    }
    for (ir::Node* n : s.forward)
        if (plan.copied.count(n)) plan.copies[s.segment.at(n)].push_back(n);
    return plan;
}

/// One entry of the new execution order: a node, or the copy of a forward node.
struct Item {
    ir::Node* node;
    bool copy;
};

/// Forward nodes, then the rest, each recomputed segment's copies just before the first node
/// of the rest that reads one of them.
std::vector<Item> schedule(const Split& s, const CopyPlan& plan) {
    std::vector<Item> order;
    for (ir::Node* n : s.forward) order.push_back({n, false});
    std::vector<bool> emitted(s.segments, false);
    for (ir::Node* n : s.rest) {
        for (const ir::Value* in : n->inputs()) {
            if (!in || !in->producer() || !plan.copied.count(in->producer())) continue;
            const int seg = s.segment.at(in->producer());
            if (emitted[seg]) continue;
            emitted[seg] = true;
            for (ir::Node* c : plan.copies[seg]) order.push_back({c, true});
        }
        order.push_back({n, false});
    }
    return order;
}

/// Whether input `in` of `item` reads a copy rather than the forward value.
bool reads_copy(const Item& item, const ir::Value* in, const CopyPlan& plan, const Split& s) {
    if (!in || !in->producer() || !plan.copied.count(in->producer())) return false;
    if (item.copy) return s.segment.at(item.node) == s.segment.at(in->producer());
    return !s.segment.count(item.node);  // a node of the rest
}

size_t schedule_peak(const ir::Graph& g, const Split& s, const CopyPlan& plan, const std::vector<Item>& order) {
    // Key: the value, and whether it is the copy's.
    std::map<std::pair<const ir::Value*, bool>, std::pair<size_t, size_t>> life;  // def, last use
    const size_t end = order.size();
    for (size_t i = 0; i < order.size(); ++i) {
        for (const ir::Value* in : order[i].node->inputs()) {
            if (!in || !in->producer()) continue;
            auto it = life.find({in, reads_copy(order[i], in, plan, s)});
            if (it != life.end()) it->second.second = i;
        }
        for (const ir::Value* o : order[i].node->outputs()) life[{o, order[i].copy}] = {i, i};
    }
    for (const ir::Value* o : g.outputs()) {
        auto it = life.find({o, false});
        if (it != life.end()) it->second.second = end;
    }
    std::vector<int64_t> delta(end + 2, 0);
    for (const auto& [key, span] : life) {
        const size_t b = value_bytes(key.first);
        delta[span.first] += static_cast<int64_t>(b);
        delta[span.second + 1] -= static_cast<int64_t>(b);
    }
    int64_t live = 0, peak = 0;
    for (int64_t d : delta) {
        live += d;
        peak = std::max(peak, live);
    }
    return static_cast<size_t>(peak);
}

void apply(ir::Graph& g, const Split& s, const CopyPlan& plan, const std::vector<Item>& order) {
    std::unordered_map<const ir::Value*, ir::Value*> copy_of;  // forward value -> its copy
    std::vector<ir::Node*> new_order;
    for (const Item& item : order) {
        if (!item.copy) {
            ir::Node* n = item.node;
            if (!s.segment.count(n))
                for (size_t i = 0; i < n->num_inputs(); ++i)
                    if (reads_copy(item, n->input(i), plan, s)) n->set_input(i, copy_of.at(n->input(i)));
            new_order.push_back(n);
            continue;
        }
        const ir::Node* f = item.node;
        std::vector<ir::Value*> inputs;
        for (ir::Value* in : f->inputs())
            inputs.push_back(reads_copy(item, in, plan, s) ? copy_of.at(in) : in);
        std::vector<ir::TensorType> types;
        for (const ir::Value* o : f->outputs()) types.push_back(o->type());
        ir::Node* c = g.add_node(f->op(), inputs, f->attrs(), types, {},
                                 pass::kRecomputePrefix + (f->name().empty() ? f->op() : f->name()));
        c->set_role(ir::NodeRole::kRecompute);
        for (size_t i = 0; i < f->num_outputs(); ++i) copy_of[f->output(i)] = c->output(i);
        new_order.push_back(c);
    }
    g.set_order(new_order);
}

}  // namespace

RecomputeMode parse_recompute_mode(const std::string& m) {
    if (m == "none") return RecomputeMode::kNone;
    if (m == "sqrt") return RecomputeMode::kSqrt;
    if (m == "auto") return RecomputeMode::kAuto;
    KILN_THROW(kInvalidArgument) << "recompute mode: expected none, sqrt or auto, got '" << m << "'";
}

std::string RecomputeReport::str() const {
    std::ostringstream os;
    os << "recompute: " << recomputed_segments << " of " << segments << " segments (" << forward_nodes
       << " forward nodes), " << copied_nodes << " nodes copied; estimated peak " << peak_before << " -> " << peak_after
       << " bytes";
    return os.str();
}

size_t estimate_peak_bytes(const ir::Graph& g) {
    Split s = split(g, 0);
    CopyPlan none;
    none.copies.resize(s.segments);
    return schedule_peak(g, s, none, schedule(s, none));
}

RecomputeReport recompute(ir::Graph& g, const RecomputeOptions& opts) {
    Split s = split(g, opts.segment_nodes);
    RecomputeReport r;
    r.forward_nodes = static_cast<int>(s.forward.size());
    r.segments = s.segments;
    auto peak_with = [&](const std::vector<bool>& rec, CopyPlan* plan_out, std::vector<Item>* order_out) {
        CopyPlan plan = plan_copies(s, rec);
        std::vector<Item> order = schedule(s, plan);
        const size_t peak = schedule_peak(g, s, plan, order);
        if (plan_out) *plan_out = std::move(plan);
        if (order_out) *order_out = std::move(order);
        return peak;
    };
    std::vector<bool> rec(s.segments, false);
    r.peak_before = r.peak_after = peak_with(rec, nullptr, nullptr);
    if (opts.mode == RecomputeMode::kNone || s.segments == 0) return r;
    if (opts.mode == RecomputeMode::kSqrt) {
        rec.assign(s.segments, true);
    } else {
        KILN_CHECK(opts.memory_limit > 0, kInvalidArgument) << "--recompute auto needs a memory limit (--memory-limit)";
        // The earliest segments' activations live longest: recompute from the front until it fits.
        int k = 0;
        size_t peak = r.peak_before;
        while (peak > opts.memory_limit && k < s.segments) {
            rec[k++] = true;
            peak = peak_with(rec, nullptr, nullptr);
        }
        KILN_CHECK(peak <= opts.memory_limit, kOutOfMemory)
            << "--recompute auto: the training step needs about " << peak << " bytes of activations even with all "
            << s.segments << " segments recomputed; the limit is " << opts.memory_limit << " bytes";
    }
    CopyPlan plan;
    std::vector<Item> order;
    r.peak_after = peak_with(rec, &plan, &order);
    r.recomputed_segments = static_cast<int>(std::count(rec.begin(), rec.end(), true));
    r.copied_nodes = static_cast<int>(plan.copied.size());
    apply(g, s, plan, order);
    return r;
}

}  // namespace kiln::autodiff
