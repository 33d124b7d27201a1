// Gradients of If, Loop and Scan (autodiff/control_flow_gradient.h).
//
// Names: a region reads enclosing values by name, so the backward regions are built with care
// for scope: values a region reads from `g` are named apart from the forward body's names
// (exported()), the region's own new inputs are named apart from both, and the recomputed
// body values keep the forward body's names (its nested regions read them by name).
#include "autodiff/control_flow_gradient.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "autodiff/differentiate.h"
#include "autodiff/loop_values.h"
#include "autodiff/region.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

using ValueMap = std::unordered_map<const ir::Value*, ir::Value*>;

std::string label(const ir::Node& n) { return n.name().empty() ? n.op() : n.name(); }

bool is_float(const ir::Value* v) { return v && v->type().is_tensor() && dtype_is_float(v->type().dtype); }

ir::TensorType i64_type(Shape s) { return ir::TensorType::of_static(DType::kInt64, std::move(s)); }

const ir::Graph& region(const ir::Node& n, const char* name) {
    auto it = n.attrs().find(name);
    const ir::GraphAttr* g = it == n.attrs().end() ? nullptr : std::get_if<ir::GraphAttr>(&it->second);
    KILN_CHECK(g && *g, kInvalidModel) << n.describe() << ": missing graph attribute '" << name << "'";
    return **g;
}

/// A value on a gradient path must be a tensor of static type (its gradient has that type).
void check_tensor(const ir::Node& n, const ir::Value* v, const std::string& what) {
    if (!v) return;
    KILN_CHECK(v->type().is_tensor(), kUnsupported)
        << "cannot differentiate through " << n.describe() << ": " << what << " '" << v->name() << "' is a "
        << v->type().str() << " (only tensors have gradients)";
    KILN_CHECK(v->type().is_static(), kUnsupported)
        << "cannot differentiate through " << n.describe() << ": " << what << " '" << v->name()
        << "' has the non-static type " << v->type().str();
}

ir::Value* add1(ir::Graph& g, const std::string& op, const std::vector<ir::Value*>& ins, ir::AttrMap attrs,
                const ir::TensorType& t, const std::string& name, const std::string& node_name) {
    ir::Node* n = g.add_node(op, ins, std::move(attrs), {t}, {name}, node_name);
    n->set_role(ir::NodeRole::kBackward);
    return n->output(0);
}

ir::Value* zeros(ir::Graph& g, const ir::TensorType& t) {
    return g.add_constant(g.fresh_name("grad/zero"), Tensor(t.dtype, t.static_shape()));
}

Tensor i64_tensor(Shape shape, int64_t v) {
    Tensor t(DType::kInt64, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, v);
    return t;
}

Tensor bool_scalar(bool v) {
    Tensor t(DType::kBool, {});
    t.set_i64(0, v ? 1 : 0);
    return t;
}

/// `v` as an output of region `r`: an Identity when no node of `r` computes it.
ir::Value* as_output(ir::Graph& r, ir::Value* v) {
    if (v->producer()) return v;
    return add1(r, "Identity", {v}, {}, v->type(), r.fresh_name("grad/out"), "grad/out");
}

/// `v` (a value of g) under a name `body` does not define: a region copying `body` can read it.
ir::Value* exported(ir::Graph& g, ir::Value* v, const ir::Graph& body) {
    if (!body.find_value(v->name())) return v;
    return add1(g, "Identity", {v}, {}, v->type(), unique_name("grad/" + v->name(), {&g, &body}), "grad/export");
}

/// The outer input of `r` named `name`, added when absent.
ir::Value* outer(ir::Graph& r, const std::string& name, const ir::TensorType& t) {
    if (ir::Value* v = r.find_value(name)) return v;
    return r.add_outer_input(name, t);
}

struct RegionVjp {
    std::vector<ir::Value*> input_grads;    // per body input (nullptr: not wanted or zero)
    std::vector<ir::Value*> capture_grads;  // per `captures` entry
};

/// Copies `body` into region `r` with its inputs bound to `ins` (values of r) and appends the
/// VJP seeded with `seeds` (per body output; nullptr: none) with respect to the body inputs in
/// `want_in` and the captured values `captures` (values of g), which r reads as outer inputs;
/// loops nested in `body` are differentiated with `mode`.
RegionVjp region_vjp(ir::Graph& r, const ir::Graph& g, const ir::Graph& body, const std::vector<ir::Value*>& ins,
                     const std::vector<ir::Value*>& seeds, const std::vector<bool>& want_in,
                     const std::vector<ir::Value*>& captures, LoopValues mode) {
    ValueMap map;
    for (size_t i = 0; i < body.inputs().size(); ++i) map[body.inputs()[i]] = ins.at(i);
    for (const std::string& name : captured_names(body)) {
        const ir::Value* from = g.find_value(name);
        const ir::Value* listed = body.find_value(name);  // an outer input of body, when listed
        if (!from && !listed) continue;                   // from further out: read through g's frame
        ir::Value* o = outer(r, name, (from ? from : listed)->type());
        if (listed) map[listed] = o;
    }
    clone_nodes(r, body, map);
    std::vector<ir::Value*> ys, wrt;
    for (const ir::Value* y : body.outputs()) ys.push_back(map.at(y));
    for (size_t i = 0; i < ins.size(); ++i)
        if (i < want_in.size() && want_in[i]) wrt.push_back(ins[i]);
    std::vector<size_t> cap_slot(captures.size(), SIZE_MAX);
    for (size_t c = 0; c < captures.size(); ++c)
        if (ir::Value* o = r.find_value(captures[c]->name());
            o && std::find(r.outer_inputs().begin(), r.outer_inputs().end(), o) != r.outer_inputs().end()) {
            cap_slot[c] = wrt.size();
            wrt.push_back(o);
        }
    const std::vector<ir::Value*> grads = vjp(r, ys, seeds, wrt, mode);
    RegionVjp out;
    size_t k = 0;
    for (size_t i = 0; i < ins.size(); ++i)
        out.input_grads.push_back(i < want_in.size() && want_in[i] ? grads[k++] : nullptr);
    for (size_t c = 0; c < captures.size(); ++c)
        out.capture_grads.push_back(cap_slot[c] == SIZE_MAX ? nullptr : grads[cap_slot[c]]);
    return out;
}

/// The captured values among `reads` (after n's inputs) that want a gradient, checked.
std::vector<size_t> wanted_captures(const ir::Node& n, const std::vector<ir::Value*>& reads,
                                    const std::vector<bool>& needs) {
    std::vector<size_t> out;
    for (size_t i = n.num_inputs(); i < reads.size(); ++i)
        if (needs[i]) {
            check_tensor(n, reads[i], "captured value");
            out.push_back(i);
        }
    return out;
}

/// A loop-carried value (a Loop's or Scan's state): a tensor of one static type across
/// iterations when it is floating point (its gradient is carried back).
void check_carried(const ir::Node& n, const ir::Value* in, const ir::Value* body_in, const ir::Value* body_out) {
    check_tensor(n, body_in, "loop-carried value");
    check_tensor(n, body_out, "loop-carried value");
    if (!is_float(body_in) && !is_float(body_out)) return;
    KILN_CHECK(body_in->type() == body_out->type() && (!in || in->type() == body_in->type()), kUnsupported)
        << "cannot differentiate through " << n.describe() << ": loop-carried value '" << body_in->name()
        << "' enters the body as " << body_in->type().str() << " but leaves it as " << body_out->type().str()
        << (in ? " (initial value " + in->type().str() + ")" : std::string());
}

// ---------------------------------------------------------------------------------------- If

ControlFlowGradient if_gradient(ir::Graph& g, ir::Node& n, const std::vector<ir::Value*>& reads,
                                const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                LoopValues mode) {
    ControlFlowGradient out;
    out.grads.assign(reads.size(), nullptr);
    const std::vector<size_t> wanted = wanted_captures(n, reads, needs);
    if (wanted.empty()) return out;
    std::vector<ir::Value*> caps;
    for (size_t i : wanted) caps.push_back(reads[i]);
    ir::AttrMap attrs;
    for (const char* which : {"then_branch", "else_branch"}) {
        const ir::Graph& branch = region(n, which);
        auto r = std::make_shared<ir::Graph>();
        r->name = branch.name + "/grad";
        std::vector<ir::Value*> seeds;
        for (size_t k = 0; k < out_grads.size(); ++k) {
            if (!out_grads[k]) {
                seeds.push_back(nullptr);
                continue;
            }
            check_tensor(n, branch.outputs().at(k), std::string(which) + " output");
            ir::Value* e = exported(g, out_grads[k], branch);
            seeds.push_back(outer(*r, e->name(), e->type()));
        }
        RegionVjp vj = region_vjp(*r, g, branch, {}, seeds, {}, caps, mode);
        for (size_t c = 0; c < caps.size(); ++c)
            r->add_output(as_output(*r, vj.capture_grads[c] ? vj.capture_grads[c] : zeros(*r, caps[c]->type())));
        attrs[which] = ir::GraphAttr(r);
    }
    std::vector<ir::TensorType> types;
    std::vector<std::string> names;
    for (ir::Value* c : caps) {
        types.push_back(c->type());
        names.push_back(g.fresh_name("grad/" + label(n) + "/"));
    }
    ir::Node* back = g.add_node("If", {n.input(0)}, attrs, types, names, "grad/" + label(n));
    back->set_role(ir::NodeRole::kBackward);
    for (size_t c = 0; c < wanted.size(); ++c) out.grads[wanted[c]] = back->output(c);
    return out;
}

// -------------------------------------------------------------------------------------- Loop

struct LoopShape {
    const ir::Graph* body = nullptr;
    size_t nc = 0, ns = 0;            // carried values, scan outputs
    std::vector<size_t> carried_grad;  // carried values whose gradient is carried back (floats)
    std::vector<size_t> caps;          // reads of captured values that want a gradient
};

LoopShape loop_shape(const ir::Node& n, const std::vector<ir::Value*>& reads, const std::vector<bool>& needs,
                     const std::vector<ir::Value*>& out_grads) {
    LoopShape s;
    s.body = &region(n, "body");
    const ir::Graph& body = *s.body;
    s.nc = n.num_inputs() > 2 ? n.num_inputs() - 2 : 0;
    KILN_CHECK(n.num_outputs() >= s.nc && body.inputs().size() == 2 + s.nc &&
                   body.outputs().size() == 1 + n.num_outputs(),
               kInvalidModel)
        << n.describe() << ": body takes " << body.inputs().size() << " inputs and returns " << body.outputs().size()
        << " values for " << s.nc << " carried values and " << n.num_outputs() << " outputs";
    s.ns = n.num_outputs() - s.nc;
    for (size_t j = 0; j < s.nc; ++j) {
        check_carried(n, n.input(2 + j), body.inputs()[2 + j], body.outputs()[1 + j]);
        if (is_float(body.inputs()[2 + j])) s.carried_grad.push_back(j);
    }
    for (size_t k = 0; k < s.ns; ++k)
        if (out_grads[s.nc + k]) check_tensor(n, body.outputs()[1 + s.nc + k], "scan output");
    s.caps = wanted_captures(n, reads, needs);
    return s;
}

/// A backward region and the forward body values it reads from stacks the forward must keep.
struct BackwardBody {
    std::shared_ptr<ir::Graph> r;
    std::vector<const ir::Value*> kept;  // body values (beyond the carried ones)
    std::vector<std::string> kept_names;  // their stacks' names in g (Loop)
};

ir::TensorType stacked(ir::TensorType t) {
    t.shape.insert(t.shape.begin(), ir::Dim::sym("?"));
    return t;
}

/// Names in g of the forward Loop's stacks and of N - 1, chosen before they exist: the
/// backward body reads them by name.
struct LoopNames {
    std::string iters, last;
    std::vector<std::string> carried;
};

LoopNames loop_names(const ir::Graph& g, const ir::Node& n, const ir::Graph& body) {
    LoopNames nm;
    const std::string base = "kept/" + label(n) + "/";
    nm.iters = unique_name(base + body.inputs()[0]->name(), {&g, &body});
    nm.last = unique_name("grad/" + label(n) + "/last", {&g, &body});
    for (size_t c = 2; c < body.inputs().size(); ++c)
        nm.carried.push_back(unique_name(base + body.inputs()[c]->name(), {&g, &body}));
    return nm;
}

/// The backward Loop's body: (j, c, dv..., dC...) -> (true, dv'..., dC'...), see the file
/// comment of the header; reads the forward's stacks named `nm` (and, kept, others it names).
BackwardBody loop_backward_body(ir::Graph& g, const ir::Node& n, const LoopShape& s, const LoopNames& nm,
                                const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& out_grads,
                                LoopValues mode) {
    const ir::Graph& body = *s.body;
    BackwardBody bb{std::make_shared<ir::Graph>(), {}, {}};
    ir::Graph& r = *bb.r;
    r.name = body.name + "/grad";
    const std::vector<const ir::Graph*> apart{&g, &body};
    ir::Value* j = r.add_input(unique_name("grad/iter", apart), i64_type({}));
    r.add_input(unique_name("grad/cond", apart), ir::TensorType::of_static(DType::kBool, {}));
    std::vector<ir::Value*> dv, dc;
    for (size_t c : s.carried_grad)
        dv.push_back(r.add_input(unique_name("grad/" + body.inputs()[2 + c]->name(), apart), body.inputs()[2 + c]->type()));
    for (size_t i : s.caps) dc.push_back(r.add_input(unique_name("grad/" + reads[i]->name(), apart), reads[i]->type()));
    // Iteration t = N - 1 - j of the forward loop: a row of each stack.
    ir::Value* t = add1(r, "Sub", {outer(r, nm.last, i64_type({})), j}, {}, i64_type({}), body.inputs()[0]->name(), "grad/step");
    auto row = [&](const std::string& stack, const ir::TensorType& type, const std::string& name) {
        return add1(r, "Gather", {outer(r, stack, stacked(type)), t}, {{"axis", int64_t{0}}}, type, name, "grad/restore");
    };
    std::vector<ir::Value*> ins{t, r.add_constant(body.inputs()[1]->name(), bool_scalar(true))};
    for (size_t c = 0; c < s.nc; ++c) ins.push_back(row(nm.carried[c], body.inputs()[2 + c]->type(), body.inputs()[2 + c]->name()));
    std::vector<ir::Value*> seeds(body.outputs().size(), nullptr);
    std::vector<bool> want(ins.size(), false);
    for (size_t a = 0; a < s.carried_grad.size(); ++a) {
        seeds[1 + s.carried_grad[a]] = dv[a];
        want[2 + s.carried_grad[a]] = true;
    }
    for (size_t k = 0; k < s.ns; ++k)
        if (ir::Value* d = out_grads[s.nc + k]) {
            ir::Value* e = exported(g, d, body);
            const ir::TensorType& type = body.outputs()[1 + s.nc + k]->type();
            seeds[1 + s.nc + k] = add1(r, "Gather", {outer(r, e->name(), e->type()), t}, {{"axis", int64_t{0}}}, type,
                                       unique_name("grad/row", {&r, &body, &g}), "grad/row");
        }
    std::vector<ir::Value*> caps;
    for (size_t i : s.caps) caps.push_back(reads[i]);
    RegionVjp vj = region_vjp(r, g, body, ins, seeds, want, caps, mode);
    r.add_output(as_output(r, ins[1]));
    for (size_t a = 0; a < s.carried_grad.size(); ++a) {
        ir::Value* d = vj.input_grads[2 + s.carried_grad[a]];
        r.add_output(as_output(r, d ? d : zeros(r, dv[a]->type())));
    }
    for (size_t c = 0; c < caps.size(); ++c) {
        ir::Value* d = vj.capture_grads[c];
        r.add_output(d ? add1(r, "Add", {dc[c], d}, {}, dc[c]->type(), r.fresh_name("grad/acc"), "grad/acc")
                       : as_output(r, dc[c]));
    }
    if (mode == LoopValues::kKeep)
        bb.kept = keep_read_values(r, body, [&](const ir::Value* v, const std::string& name) {
            bb.kept_names.push_back(unique_name("kept/" + label(n) + "/" + name, {&g, &body, &r}));
            return row(bb.kept_names.back(), v->type(), name);
        });
    return bb;
}

ControlFlowGradient loop_gradient(ir::Graph& g, ir::Node& n, const std::vector<ir::Value*>& reads,
                                  const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                  LoopValues mode) {
    const LoopShape s = loop_shape(n, reads, needs, out_grads);
    const ir::Graph& body = *s.body;
    const LoopNames nm = loop_names(g, n, body);
    const BackwardBody bb = loop_backward_body(g, n, s, nm, reads, out_grads, mode);
    // The forward keeps i (its stack's length is N), the carried values and the kept values.
    std::vector<const ir::Value*> keep{body.inputs()[0]};
    std::vector<std::string> names{nm.iters};
    for (size_t c = 0; c < s.nc; ++c) {
        keep.push_back(body.inputs()[2 + c]);
        names.push_back(nm.carried[c]);
    }
    keep.insert(keep.end(), bb.kept.begin(), bb.kept.end());
    names.insert(names.end(), bb.kept_names.begin(), bb.kept_names.end());
    ir::Node* fwd = keep_body_values(g, n, keep, names, {});
    const std::string who = "grad/" + label(n);
    ir::Value* trips = add1(g, "Shape", {fwd->output(n.num_outputs())}, {}, i64_type({1}), g.fresh_name(who + "/trips"), who);
    ir::Value* one = g.add_constant(g.fresh_name(who + "/one"), i64_tensor({1}, 1));
    ir::Value* minus1 = add1(g, "Sub", {trips, one}, {}, i64_type({1}), g.fresh_name(who + "/last"), who);
    ir::Value* rank0 = g.add_constant(g.fresh_name(who + "/rank0"), Tensor(DType::kInt64, {0}));
    add1(g, "Reshape", {minus1, rank0}, {}, i64_type({}), nm.last, who);

    std::vector<ir::Value*> ins{trips, nullptr};
    std::vector<ir::TensorType> types;
    for (size_t c : s.carried_grad) {
        ir::Value* v0 = reads[2 + c];
        ins.push_back(out_grads[c] ? out_grads[c] : zeros(g, v0->type()));
        types.push_back(v0->type());
    }
    for (size_t i : s.caps) {
        ins.push_back(zeros(g, reads[i]->type()));
        types.push_back(reads[i]->type());
    }
    std::vector<std::string> out_names;
    for (size_t k = 0; k < types.size(); ++k) out_names.push_back(g.fresh_name(who + "/"));
    ir::Node* back = g.add_node("Loop", ins, {{"body", ir::GraphAttr(bb.r)}}, types, out_names, who);
    back->set_role(ir::NodeRole::kBackward);
    ControlFlowGradient out;
    out.grads.assign(reads.size(), nullptr);
    out.superseded = &n;
    for (size_t a = 0; a < s.carried_grad.size(); ++a) out.grads[2 + s.carried_grad[a]] = back->output(a);
    for (size_t c = 0; c < s.caps.size(); ++c) out.grads[s.caps[c]] = back->output(s.carried_grad.size() + c);
    return out;
}

// -------------------------------------------------------------------------------------- Scan

struct ScanShape {
    const ir::Graph* body = nullptr;
    size_t nst = 0, nin = 0, nout = 0;  // states, scan inputs, scan outputs
    std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
    std::vector<size_t> state_grad;  // states whose gradient is carried back (floats)
    std::vector<size_t> dx;          // scan inputs whose gradient is wanted
    std::vector<size_t> dout;        // scan outputs with a gradient
    std::vector<size_t> caps;        // reads of captured values that want a gradient
};

std::vector<int64_t> per_value(const ir::Node& n, const char* name, size_t count) {
    std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(count, 0));
    KILN_CHECK(v.size() == count, kInvalidModel)
        << n.describe() << ": attribute " << name << " has " << v.size() << " entries, expected " << count;
    return v;
}

ScanShape scan_shape(const ir::Node& n, const std::vector<ir::Value*>& reads, const std::vector<bool>& needs,
                     const std::vector<ir::Value*>& out_grads) {
    ScanShape s;
    s.body = &region(n, "body");
    const ir::Graph& body = *s.body;
    KILN_CHECK(!n.has_attr("directions") && n.num_inputs() == body.inputs().size(), kUnsupported)
        << "cannot differentiate through " << n.describe()
        << ": Scan-8 (sequence_lens and a batch axis) has no gradient; Scan-9 and later do";
    s.nin = static_cast<size_t>(n.attr_int("num_scan_inputs", 0));
    KILN_CHECK(s.nin >= 1 && s.nin <= n.num_inputs() && n.num_outputs() >= n.num_inputs() - s.nin &&
                   body.outputs().size() == n.num_outputs(),
               kInvalidModel)
        << n.describe() << ": " << n.num_inputs() << " inputs, " << n.num_outputs() << " outputs and a body of "
        << body.outputs().size() << " outputs do not fit num_scan_inputs = " << s.nin;
    s.nst = n.num_inputs() - s.nin;
    s.nout = n.num_outputs() - s.nst;
    s.in_axes = per_value(n, "scan_input_axes", s.nin);
    s.in_dirs = per_value(n, "scan_input_directions", s.nin);
    s.out_axes = per_value(n, "scan_output_axes", s.nout);
    s.out_dirs = per_value(n, "scan_output_directions", s.nout);
    for (size_t j = 0; j < s.nst; ++j) {
        check_carried(n, n.input(j), body.inputs()[j], body.outputs()[j]);
        if (is_float(body.inputs()[j])) s.state_grad.push_back(j);
    }
    for (size_t k = 0; k < s.nin; ++k)
        if (needs[s.nst + k]) {
            check_tensor(n, body.inputs()[s.nst + k], "scan input slice");
            s.dx.push_back(k);
        }
    for (size_t k = 0; k < s.nout; ++k)
        if (out_grads[s.nst + k]) {
            check_tensor(n, body.outputs()[s.nst + k], "scan output");
            s.dout.push_back(k);
        }
    s.caps = wanted_captures(n, reads, needs);
    return s;
}

/// The backward Scan's body: (dstate..., dC..., state..., x..., dout..., kept...) ->
/// (dstate'..., dC'..., dx...); the state and x slices take the forward body's input names.
BackwardBody scan_backward_body(const ir::Graph& g, const ScanShape& s, const std::vector<ir::Value*>& reads,
                                LoopValues mode) {
    const ir::Graph& body = *s.body;
    BackwardBody bb{std::make_shared<ir::Graph>(), {}, {}};
    ir::Graph& r = *bb.r;
    r.name = body.name + "/grad";
    const std::vector<const ir::Graph*> apart{&g, &body};
    std::vector<ir::Value*> dstate, dc, ins;
    for (size_t j : s.state_grad)
        dstate.push_back(r.add_input(unique_name("grad/" + body.inputs()[j]->name(), apart), body.inputs()[j]->type()));
    for (size_t i : s.caps) dc.push_back(r.add_input(unique_name("grad/" + reads[i]->name(), apart), reads[i]->type()));
    for (const ir::Value* bi : body.inputs()) ins.push_back(r.add_input(bi->name(), bi->type()));
    std::vector<ir::Value*> seeds(body.outputs().size(), nullptr);
    for (size_t a = 0; a < s.state_grad.size(); ++a) seeds[s.state_grad[a]] = dstate[a];
    for (size_t k : s.dout) {
        const ir::Value* bo = body.outputs()[s.nst + k];
        seeds[s.nst + k] = r.add_input(unique_name("grad/" + bo->name(), apart), bo->type());
    }
    std::vector<bool> want(ins.size(), false);
    for (size_t j : s.state_grad) want[j] = true;
    for (size_t k : s.dx) want[s.nst + k] = true;
    std::vector<ir::Value*> caps;
    for (size_t i : s.caps) caps.push_back(reads[i]);
    RegionVjp vj = region_vjp(r, g, body, ins, seeds, want, caps, mode);
    for (size_t a = 0; a < s.state_grad.size(); ++a) {
        ir::Value* d = vj.input_grads[s.state_grad[a]];
        r.add_output(as_output(r, d ? d : zeros(r, dstate[a]->type())));
    }
    for (size_t c = 0; c < caps.size(); ++c) {
        ir::Value* d = vj.capture_grads[c];
        r.add_output(d ? add1(r, "Add", {dc[c], d}, {}, dc[c]->type(), r.fresh_name("grad/acc"), "grad/acc")
                       : as_output(r, dc[c]));
    }
    for (size_t k : s.dx) {
        ir::Value* d = vj.input_grads[s.nst + k];
        r.add_output(as_output(r, d ? d : zeros(r, ins[s.nst + k]->type())));
    }
    if (mode == LoopValues::kKeep)  // kept values come in as extra scan inputs, after dout
        bb.kept = keep_read_values(r, body, [&](const ir::Value* v, const std::string& name) {
            return r.add_input(name, v->type());
        });
    return bb;
}

/// The backward Scan's inputs (states: dstate, dC; scan inputs, read backwards: kept states,
/// forward scan inputs, dout, kept values) with their axes and directions.
struct ScanInputs {
    std::vector<ir::Value*> values;
    std::vector<int64_t> axes, dirs;
    void add(ir::Value* v, int64_t axis, int64_t dir) {
        values.push_back(v);
        axes.push_back(axis);
        dirs.push_back(dir);
    }
};

ControlFlowGradient scan_gradient(ir::Graph& g, ir::Node& n, const std::vector<ir::Value*>& reads,
                                  const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                  LoopValues mode) {
    const ScanShape s = scan_shape(n, reads, needs, out_grads);
    const ir::Graph& body = *s.body;
    const BackwardBody bb = scan_backward_body(g, s, reads, mode);
    std::vector<const ir::Value*> keep(body.inputs().begin(), body.inputs().begin() + static_cast<std::ptrdiff_t>(s.nst));
    keep.insert(keep.end(), bb.kept.begin(), bb.kept.end());
    std::vector<std::string> names;
    for (const ir::Value* v : keep) names.push_back(unique_name("kept/" + label(n) + "/" + v->name(), {&g, &body}));
    std::vector<int64_t> axes = s.out_axes, dirs = s.out_dirs;
    axes.resize(s.nout + keep.size(), 0);
    dirs.resize(s.nout + keep.size(), 0);
    ir::Node* fwd = keep_body_values(g, n, keep, names, {{"scan_output_axes", axes}, {"scan_output_directions", dirs}});

    const std::string who = "grad/" + label(n);
    ScanInputs in;
    std::vector<ir::TensorType> types;
    for (size_t j : s.state_grad) {
        in.values.push_back(out_grads[j] ? out_grads[j] : zeros(g, reads[j]->type()));
        types.push_back(reads[j]->type());
    }
    for (size_t i : s.caps) {
        in.values.push_back(zeros(g, reads[i]->type()));
        types.push_back(reads[i]->type());
    }
    const size_t num_state = in.values.size();
    for (size_t j = 0; j < s.nst; ++j) in.add(fwd->output(n.num_outputs() + j), 0, 1);
    for (size_t k = 0; k < s.nin; ++k) in.add(fwd->input(s.nst + k), s.in_axes[k], 1 - s.in_dirs[k]);
    for (size_t k : s.dout) in.add(out_grads[s.nst + k], s.out_axes[k], 1 - s.out_dirs[k]);
    for (size_t k = 0; k < bb.kept.size(); ++k) in.add(fwd->output(n.num_outputs() + s.nst + k), 0, 1);
    std::vector<int64_t> out_axes, out_dirs;
    for (size_t k : s.dx) {
        types.push_back(reads[s.nst + k]->type());
        out_axes.push_back(s.in_axes[k]);
        out_dirs.push_back(1 - s.in_dirs[k]);
    }
    std::vector<std::string> out_names;
    for (size_t i = 0; i < types.size(); ++i) out_names.push_back(g.fresh_name(who + "/"));
    const auto num_scan = static_cast<int64_t>(in.values.size() - num_state);
    ir::AttrMap attrs{{"body", ir::GraphAttr(bb.r)},   {"num_scan_inputs", num_scan},
                      {"scan_input_axes", in.axes},    {"scan_input_directions", in.dirs},
                      {"scan_output_axes", out_axes},  {"scan_output_directions", out_dirs}};
    ir::Node* back = g.add_node("Scan", in.values, attrs, types, out_names, who);
    back->set_role(ir::NodeRole::kBackward);
    ControlFlowGradient out;
    out.grads.assign(reads.size(), nullptr);
    out.superseded = &n;
    size_t o = 0;
    for (size_t j : s.state_grad) out.grads[j] = back->output(o++);
    for (size_t i : s.caps) out.grads[i] = back->output(o++);
    for (size_t k : s.dx) out.grads[s.nst + k] = back->output(o++);
    return out;
}

}  // namespace

bool is_control_flow(const ir::Node& n) {
    return has_region(n) && (n.op() == "If" || n.op() == "Loop" || n.op() == "Scan");
}

ControlFlowGradient control_flow_gradient(ir::Graph& g, ir::Node& n, const std::vector<ir::Value*>& reads,
                                          const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                          LoopValues mode) {
    if (n.op() == "If") return if_gradient(g, n, reads, needs, out_grads, mode);
    if (n.op() == "Loop") return loop_gradient(g, n, reads, needs, out_grads, mode);
    KILN_CHECK(n.op() == "Scan", kInternal) << "bug in Kiln: control_flow_gradient of " << n.describe();
    return scan_gradient(g, n, reads, needs, out_grads, mode);
}

}  // namespace kiln::autodiff
