// lower_to_frames (see the header for the shapes it produces).
//
// A Scope is where lowered nodes go: the root graph, a loop frame, or one branch of an If. Each
// maps its sub-graph's value names to values of the one graph (so a nested sub-graph finds the
// outer values it names) and caches what it brought in from its parent: a loop invariant Enter,
// or a branch's Switch side. A value defined outside a scope is always read through one of those
// (never directly), so every node belongs to exactly one frame, as the executor checks.
// NOTE: a node of a frame or branch must depend on a value that is live once per iteration
// (the executor starts a node when its inputs arrive); constants arrive from nowhere, so a
// constant that starts a chain in a scope (a counter's 0, a constant initial value) is gated
// through the scope's pivot Switch first.
#include "compiler/lower_to_frames.h"

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"
#include "support/scalar_tensor.h"

namespace kiln::compiler {
namespace {

struct Scope {
    enum class Kind { kRoot, kFrame, kBranch };
    Scope* parent = nullptr;
    Kind kind = Kind::kRoot;
    std::string frame;           // kFrame: its name; others: the enclosing frame's ("" at root)
    ir::Value* pivot = nullptr;  // kFrame: the loop predicate p; kBranch: the If's cond
    int side = 1;                // which Switch output is live in this scope
    std::unordered_map<std::string, ir::Value*> names;
    std::unordered_map<ir::Value*, ir::Value*> entered;
};

class Lowerer {
public:
    Lowerer(ir::Graph& g, const FramesLoweringOptions& opts) : g_(g), opts_(opts) {}

    std::vector<ir::Value*> lower(const ir::Node& n, const std::vector<ir::Value*>& ins, Scope& s) {
        return n.op() == "If" ? lower_if(n, ins, s) : lower_loop(n, ins, s);
    }

private:
    ir::Node* add(const std::string& op, const std::vector<ir::Value*>& ins, ir::AttrMap attrs,
                  const std::string& name) {
        const op::OpDef* def = op::OpRegistry::global().find(op);
        KILN_CHECK(def != nullptr, kUnsupported) << "node '" << name << "': unknown op " << op;
        std::vector<ir::TensorType> types(static_cast<size_t>(def->min_outputs), ir::TensorType(DType::kFloat32, {}));
        std::vector<std::string> out_names;
        for (size_t i = 0; i < types.size(); ++i) out_names.push_back(g_.fresh_name(name + ":"));
        ir::Node* n = g_.add_node(op, ins, std::move(attrs), types, out_names, name);
        op::check_node(*n, *def);
        op::infer_node(*n);
        return n;
    }

    std::vector<ir::Value*> switch_of(ir::Value* data, ir::Value* pred, const std::string& where) {
        ir::Node* n = add("Switch", {data, pred}, {}, where + "/switch" + std::to_string(counter_++));
        return {n->output(0), n->output(1)};
    }

    /// `v` (a constant) made live once per iteration of `s` (see the NOTE above).
    ir::Value* live_constant(Scope& s, ir::Value* v) {
        if (!v->is_constant() || s.kind == Scope::Kind::kRoot) return v;
        return switch_of(v, s.pivot, s.frame + "/gate")[static_cast<size_t>(s.side)];
    }

    /// A value of s's parent as read inside s.
    ir::Value* bring_in(Scope& s, ir::Value* v) {
        if (v->is_constant() || s.kind == Scope::Kind::kRoot) return v;
        auto it = s.entered.find(v);
        if (it != s.entered.end()) return it->second;
        ir::Value* in;
        if (s.kind == Scope::Kind::kFrame)
            in = add("Enter", {v}, enter_attrs(s.frame, -1, true), s.frame + "/enter:" + v->name())->output(0);
        else
            in = switch_of(v, s.pivot, s.frame + "/branch")[static_cast<size_t>(s.side)];
        s.entered[v] = in;
        return in;
    }

    ir::Value* resolve(Scope& s, const std::string& name, const ir::Node& owner) {
        auto it = s.names.find(name);
        if (it != s.names.end()) return it->second;
        if (!s.parent) {
            ir::Value* v = g_.find_value(name);
            KILN_CHECK(v != nullptr, kInvalidModel)
                << owner.describe() << ": its sub-graph reads '" << name << "', which no enclosing graph defines";
            return v;
        }
        return bring_in(s, resolve(*s.parent, name, owner));
    }

    ir::AttrMap enter_attrs(const std::string& frame, int64_t slot, bool constant) const {
        return {{"frame", frame},
                {"slot", slot},
                {"constant", int64_t{constant ? 1 : 0}},
                {"parallel_iterations", int64_t{opts_.parallel_iterations}},
                {"max_iterations", opts_.max_iterations}};
    }

    /// Adds sub-graph `sub`'s nodes to s (its inputs already in `map`); returns its outputs.
    std::vector<ir::Value*> inline_graph(const ir::Graph& sub, Scope& s, const ir::Node& owner,
                                         std::unordered_map<const ir::Value*, ir::Value*>& map) {
        for (const auto& [v, mapped] : map) s.names[v->name()] = mapped;
        for (ir::Value* o : sub.outer_inputs()) s.names[o->name()] = map[o] = resolve(s, o->name(), owner);
        for (ir::Value* c : sub.constants())
            s.names[c->name()] = map[c] = g_.add_constant(g_.fresh_name(s.frame + "/" + c->name()), c->constant());
        for (const ir::Node* n : sub.nodes()) {
            std::vector<ir::Value*> ins;
            for (const ir::Value* v : n->inputs()) ins.push_back(v ? map.at(v) : nullptr);
            std::vector<ir::Value*> outs;
            if (n->op() == "If" || n->op() == "Loop") {
                outs = lower(*n, ins, s);
            } else {
                std::string name =
                    s.frame + "/" + (n->name().empty() ? n->op() + std::to_string(counter_++) : n->name());
                std::vector<ir::TensorType> types(n->num_outputs(), ir::TensorType(DType::kFloat32, {}));
                ir::Node* m = g_.add_node(n->op(), ins, n->attrs(), types, {}, name);
                m->set_role(n->role());
                op::infer_node(*m);
                outs = m->outputs();
            }
            for (size_t i = 0; i < n->num_outputs(); ++i)
                s.names[n->output(i)->name()] = map[n->output(i)] = outs.at(i);
        }
        std::vector<ir::Value*> outs;
        for (const ir::Value* o : sub.outputs()) outs.push_back(map.at(o));
        return outs;
    }

    std::vector<ir::Value*> lower_if(const ir::Node& n, const std::vector<ir::Value*>& ins, Scope& s);
    std::vector<ir::Value*> lower_loop(const ir::Node& n, const std::vector<ir::Value*>& ins, Scope& s);
    /// Enter -> Merge of loop variable `slot` of frame f (entered from s); returns the Merge.
    ir::Value* loop_variable(Scope& s, Scope& f, ir::Value* init, int64_t slot);
    /// NextIteration of `slot`, its value gated by the frame's predicate.
    void next_iteration(Scope& f, ir::Value* v, int64_t slot);
    /// A scan output as a loop-carried stack (see the header); returns the Loop's output.
    ir::Value* scan_stack(Scope& s, Scope& f, int64_t trips, ir::Value* y, ir::Value* i, int64_t slot);

    ir::Graph& g_;
    FramesLoweringOptions opts_;
    int counter_ = 0;
};

const ir::Graph& graph_attr(const ir::Node& n, const std::string& key) {
    auto it = n.attrs().find(key);
    KILN_CHECK(it != n.attrs().end() && std::holds_alternative<ir::GraphAttr>(it->second), kInvalidModel)
        << n.describe() << ": missing sub-graph attribute '" << key << "'";
    return *std::get<ir::GraphAttr>(it->second);
}

/// The trip count of a Loop with scan outputs: they are stacks of a static length, so the loop
/// must run exactly M times (M constant; a cond, when given, constant true and passed through).
int64_t static_trips(const ir::Node& n, const ir::Graph& body, const ir::Value* trip, const ir::Value* cond) {
    KILN_CHECK(trip && trip->is_constant(), kUnsupported)
        << n.describe() << ": scan outputs need a constant trip count under control_flow=frames "
        << "(their length is compiled in)";
    const ir::Value* out = body.outputs()[0];
    const ir::Node* p = out->producer();
    const bool passes_cond = out == body.inputs()[1] || (p && p->op() == "Identity" && p->input(0) == body.inputs()[1]);
    KILN_CHECK(!cond || (cond->is_constant() && cond->constant().get_f64(0) != 0 && passes_cond), kUnsupported)
        << n.describe() << ": scan outputs under control_flow=frames need a loop that runs exactly its trip count "
        << "(no cond, or a constant true cond the body passes on)";
    const int64_t m = static_cast<int64_t>(trip->constant().get_f64(0));
    KILN_CHECK(m >= 0, kInvalidModel) << n.describe() << ": trip count " << m << " is negative";
    return m;
}

std::string node_key(const ir::Node& n, int counter) {
    return n.name().empty() ? n.op() + std::to_string(counter) : n.name();
}

}  // namespace

namespace {

std::vector<ir::Value*> Lowerer::lower_if(const ir::Node& n, const std::vector<ir::Value*>& ins, Scope& s) {
    KILN_CHECK(!ins.empty() && ins[0], kInvalidModel) << n.describe() << ": needs its cond input";
    const std::string where = (s.frame.empty() ? "" : s.frame + "/") + node_key(n, counter_++);
    std::vector<std::vector<ir::Value*>> branch_outs;
    for (int side : {1, 0}) {
        Scope b;
        b.parent = &s;
        b.kind = Scope::Kind::kBranch;
        b.frame = where + (side ? "/then" : "/else");
        b.pivot = ins[0];
        b.side = side;
        std::unordered_map<const ir::Value*, ir::Value*> map;
        std::vector<ir::Value*> outs = inline_graph(graph_attr(n, side ? "then_branch" : "else_branch"), b, n, map);
        // Gate every output through the branch's side, so that exactly one Merge input is live.
        for (ir::Value*& o : outs) o = switch_of(o, ins[0], b.frame + "/out")[static_cast<size_t>(side)];
        branch_outs.push_back(std::move(outs));
    }
    KILN_CHECK(branch_outs[0].size() == n.num_outputs() && branch_outs[1].size() == n.num_outputs(), kInvalidModel)
        << n.describe() << ": has " << n.num_outputs() << " outputs, its branches return " << branch_outs[0].size()
        << " and " << branch_outs[1].size();
    std::vector<ir::Value*> outs;
    for (size_t k = 0; k < n.num_outputs(); ++k) {
        ir::Node* m = add("Merge", {branch_outs[0][k], branch_outs[1][k]}, {}, where + "/merge" + std::to_string(k));
        outs.push_back(m->output(0));
    }
    return outs;
}

std::vector<ir::Value*> Lowerer::lower_loop(const ir::Node& n, const std::vector<ir::Value*>& ins, Scope& s) {
    const ir::Graph& body = graph_attr(n, "body");
    ir::Value* trip = ins.size() > 0 ? ins[0] : nullptr;
    ir::Value* cond = ins.size() > 1 ? ins[1] : nullptr;
    const size_t carried = ins.size() > 2 ? ins.size() - 2 : 0;
    KILN_CHECK(trip || cond, kUnsupported) << n.describe() << ": a Loop with neither a trip count nor a cond "
                                           << "never ends; control_flow=frames takes loops that do";
    KILN_CHECK(body.outputs().size() >= 1 + carried, kInvalidModel)
        << n.describe() << ": its body returns " << body.outputs().size() << " outputs, expected at least " << 1 + carried;
    const size_t scans = body.outputs().size() - 1 - carried;
    const int64_t trips = scans ? static_trips(n, body, trip, cond) : -1;
    KILN_CHECK(body.inputs().size() == 2 + carried, kInvalidModel)
        << n.describe() << ": its body takes " << body.inputs().size() << " inputs, expected " << 2 + carried;
    Scope f;
    f.parent = &s;
    f.kind = Scope::Kind::kFrame;
    f.frame = (s.frame.empty() ? "" : s.frame + "/") + node_key(n, counter_++);
    // Loop variables: slot 0 the counter, 1 the cond (when given), 2+j the carried values.
    std::vector<ir::Value*> inits = {g_.add_constant(g_.fresh_name(f.frame + "/i0"), scalar_i64(0))};
    inits.push_back(cond);
    for (size_t j = 0; j < carried; ++j) inits.push_back(ins[2 + j]);
    std::vector<ir::Value*> merges(inits.size(), nullptr);
    for (size_t k = 0; k < inits.size(); ++k)
        if (inits[k]) merges[k] = loop_variable(s, f, inits[k], static_cast<int64_t>(k));
    ir::Value* p = nullptr;
    if (trip) p = add("Less", {merges[0], bring_in(f, trip)}, {}, f.frame + "/less")->output(0);
    if (cond) p = p ? add("And", {p, merges[1]}, {}, f.frame + "/and")->output(0) : merges[1];
    f.pivot = p;
    std::vector<std::vector<ir::Value*>> sw(inits.size());
    for (size_t k = 0; k < inits.size(); ++k)
        if (merges[k]) sw[k] = switch_of(merges[k], p, f.frame + "/loop");
    std::unordered_map<const ir::Value*, ir::Value*> map;
    map[body.inputs()[0]] = sw[0][1];
    map[body.inputs()[1]] =
        cond ? sw[1][1] : live_constant(f, g_.add_constant(g_.fresh_name(f.frame + "/true"), scalar_bool(true)));
    for (size_t j = 0; j < carried; ++j) map[body.inputs()[2 + j]] = sw[2 + j][1];
    std::vector<ir::Value*> outs = inline_graph(body, f, n, map);
    ir::Value* one = g_.add_constant(g_.fresh_name(f.frame + "/one"), scalar_i64(1));
    std::vector<ir::Value*> next = {add("Add", {sw[0][1], one}, {}, f.frame + "/next_i")->output(0),
                                    cond ? outs[0] : nullptr};
    for (size_t j = 0; j < carried; ++j) next.push_back(outs[1 + j]);
    for (size_t k = 0; k < next.size(); ++k)
        if (next[k]) next_iteration(f, next[k], static_cast<int64_t>(k));
    std::vector<ir::Value*> results;
    for (size_t j = 0; j < carried; ++j)
        results.push_back(add("Exit", {sw[2 + j][0]}, {}, f.frame + "/exit" + std::to_string(j))->output(0));
    for (size_t k = 0; k < scans; ++k)
        results.push_back(scan_stack(s, f, trips, outs[1 + carried + k], sw[0][1], static_cast<int64_t>(2 + carried + k)));
    return results;
}

ir::Value* Lowerer::loop_variable(Scope& s, Scope& f, ir::Value* init, int64_t slot) {
    ir::Node* e = add("Enter", {live_constant(s, init)}, enter_attrs(f.frame, slot, false),
                      f.frame + "/enter" + std::to_string(slot));
    return add("Merge", {e->output(0)}, {{"frame", f.frame}, {"slot", slot}}, f.frame + "/merge" + std::to_string(slot))
        ->output(0);
}

void Lowerer::next_iteration(Scope& f, ir::Value* v, int64_t slot) {
    ir::Value* gated = switch_of(v, f.pivot, f.frame + "/next")[1];
    add("NextIteration", {gated}, {{"frame", f.frame}, {"slot", slot}}, f.frame + "/next_iteration" + std::to_string(slot));
}

ir::Value* Lowerer::scan_stack(Scope& s, Scope& f, int64_t trips, ir::Value* y, ir::Value* i, int64_t slot) {
    const ir::TensorType& t = y->type();
    KILN_CHECK(t.is_static(), kUnsupported) << "Loop '" << f.frame << "': scan output " << slot << " has type "
                                            << t.str() << "; control_flow=frames needs a static shape";
    Shape row_shape = {1}, stack_shape = {trips}, iota_shape = {trips};
    for (int64_t d : t.static_shape()) {
        row_shape.push_back(d);
        stack_shape.push_back(d);
        iota_shape.push_back(1);
    }
    Tensor zeros(t.dtype, stack_shape);
    if (zeros.nbytes() > 0) std::memset(zeros.data(), 0, zeros.nbytes());
    ir::Value* init = g_.add_constant(g_.fresh_name(f.frame + "/stack0"), zeros);
    if (trips == 0) return init;  // no iteration writes it
    Tensor iota(DType::kInt64, iota_shape), shape(DType::kInt64, {static_cast<int64_t>(row_shape.size())});
    for (int64_t r = 0; r < trips; ++r) iota.set_i64(r, r);
    for (size_t d = 0; d < row_shape.size(); ++d) shape.set_i64(static_cast<int64_t>(d), row_shape[d]);
    std::vector<ir::Value*> stack = switch_of(loop_variable(s, f, init, slot), f.pivot, f.frame + "/loop");
    ir::Value* mask = add("Equal", {g_.add_constant(g_.fresh_name(f.frame + "/iota"), iota), i}, {},
                          f.frame + "/scan_row" + std::to_string(slot))->output(0);
    ir::Value* row = add("Reshape", {y, g_.add_constant(g_.fresh_name(f.frame + "/row_shape"), shape)}, {},
                         f.frame + "/scan_reshape" + std::to_string(slot))->output(0);
    ir::Value* written = add("Where", {mask, row, stack[1]}, {}, f.frame + "/scan_write" + std::to_string(slot))->output(0);
    next_iteration(f, written, slot);
    return add("Exit", {stack[0]}, {}, f.frame + "/exit_scan" + std::to_string(slot))->output(0);
}

}  // namespace

void lower_to_frames(ir::Graph& g, const FramesLoweringOptions& opts) {
    KILN_CHECK(opts.parallel_iterations >= 1, kInvalidArgument)
        << "parallel_iterations must be >= 1, got " << opts.parallel_iterations;
    Lowerer lowerer(g, opts);
    Scope root;
    bool changed = false;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "If" && n->op() != "Loop") continue;
        std::vector<ir::Value*> outs = lowerer.lower(*n, n->inputs(), root);
        for (size_t i = 0; i < n->num_outputs() && i < outs.size(); ++i) g.replace_all_uses(n->output(i), outs[i]);
        g.erase_node(n);
        changed = true;
    }
    if (changed) g.topo_sort();
}

}  // namespace kiln::compiler
