// ControlFlowLowerer: functions and segments (see lower_control_flow.h for the scheme).
#include "compiler/control_flow_lowerer.h"

#include <algorithm>

#include "compiler/fold_constant_node.h"
#include "compiler/graph_plan.h"
#include "compiler/interpreted_callee.h"
#include "op/registry.h"
#include "runtime/vm/executable_callee.h"

namespace kiln::compiler {

vm::RegType reg_type_of(const ir::TensorType& t) {
    vm::RegType r;
    r.dtype = t.dtype;
    for (const ir::Dim& d : t.shape) r.shape.push_back(d.is_static() ? d.value : -1);
    return r;
}

ir::TensorType ir_type_of(const vm::RegType& t) {
    std::vector<ir::Dim> dims;
    for (int64_t d : t.shape) dims.push_back(d >= 0 ? ir::Dim(d) : ir::Dim::sym("?"));
    return ir::TensorType(t.dtype, dims);
}

bool is_known(const vm::RegType& t) {
    return std::all_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d >= 0; });
}

bool is_control_flow_op(const std::string& op) { return op == "If" || op == "Loop" || op == "Scan"; }

ControlFlowLowerer::ControlFlowLowerer(const LowerContext& ctx)
    : ctx_(ctx), program_(std::make_shared<vm::Program>()) {}

ControlFlowLowering ControlFlowLowerer::finish(int entry) {
    program_->entry = entry;
    stats_.program = program_;
    return stats_;
}

int ControlFlowLowerer::add_callee(std::shared_ptr<vm::Callee> c) {
    program_->callees.push_back(std::move(c));
    return static_cast<int>(program_->callees.size()) - 1;
}

int ControlFlowLowerer::new_reg(Scope& s, vm::RegType t) {
    vm::Function& f = fn(s);
    f.types.push_back(std::move(t));
    return f.num_regs++;
}

const Tensor* ControlFlowLowerer::constant_of(const Scope& s, const ir::Value* v) const {
    if (v->is_constant()) return &v->constant();
    if (auto f = s.folded.find(v); f != s.folded.end()) return &f->second;
    auto it = s.consts.find(v->name());
    return it != s.consts.end() && !s.reg.count(v) && !v->producer() ? &it->second : nullptr;
}

// The register of `v`: its own, a captured param, or a constant register made on first use.
int ControlFlowLowerer::reg_of(Scope& s, const ir::Value* v) {
    if (auto it = s.reg.find(v); it != s.reg.end()) return it->second;
    if (const Tensor* c = constant_of(s, v)) {
        const int r = new_reg(s, vm::RegType{c->dtype(), c->shape()});
        fn(s).constants.emplace_back(r, *c);
        return s.reg[v] = r;
    }
    auto it = s.outer.find(v->name());
    KILN_CHECK(it != s.outer.end(), kInternal) << "bug in Kiln: lowering reads '" << v->name() << "' before it is defined";
    return s.reg[v] = it->second;
}

int ControlFlowLowerer::lower_function(const ir::Graph& g, const std::string& name,
                                       const std::vector<vm::RegType>& param_types,
                                       const std::vector<Captured>& captured,
                                       const std::map<std::string, Tensor>* frozen) {
    program_->functions.emplace_back();
    Scope s;
    s.g = &g;
    s.fn = static_cast<int>(program_->functions.size()) - 1;
    fn(s).name = name;
    KILN_CHECK(param_types.size() == g.inputs().size(), kInternal)
        << "bug in Kiln: " << name << " takes " << g.inputs().size() << " inputs, lowered with " << param_types.size();
    for (size_t i = 0; i < param_types.size(); ++i) {
        const int r = new_reg(s, param_types[i]);
        fn(s).params.push_back(r);
        s.reg[g.inputs()[i]] = r;
        if (frozen && frozen->count(g.inputs()[i]->name())) s.folded[g.inputs()[i]] = frozen->at(g.inputs()[i]->name());
    }
    for (const Captured& c : captured) {
        if (c.reg < 0) {
            s.consts[c.name] = c.constant;
            continue;
        }
        const int r = new_reg(s, c.type);
        fn(s).params.push_back(r);
        s.outer[c.name] = r;
    }
    for (const ir::Node* n : g.nodes())
        if (is_control_flow_op(n->op())) captured_names(*n, s.captured_later);
    std::vector<const ir::Node*> segment;
    for (const ir::Node* n : g.nodes()) {
        if (is_control_flow_op(n->op())) {
            flush_segment(s, segment);
            lower_node(s, *n);
        } else if (n->op() == "Identity" && n->input(0) && s.reg.count(n->input(0))) {
            // A value already in a register: the output names the same register (registers are
            // never written in place while another name may read them), no instruction.
            s.reg[n->output(0)] = reg_of(s, n->input(0));
        } else {
            segment.push_back(n);
        }
    }
    flush_segment(s, segment);
    for (size_t k = 0; k < g.outputs().size(); ++k) {
        fn(s).results.push_back(reg_of(s, g.outputs()[k]));
        if (const Tensor* c = constant_of(s, g.outputs()[k])) constant_results_[s.fn][k] = *c;
    }
    fn(s).code.push_back(vm::Instr{vm::Op::kRet});
    return s.fn;
}

void ControlFlowLowerer::lower_node(Scope& s, const ir::Node& n) {
    try {
        if (n.op() == "If") return lower_if(s, n);
        if (n.op() == "Loop") return lower_loop(s, n);
        return lower_scan(s, n);
    } catch (Error& e) {
        e.add_context("while lowering " + n.describe() + " for the VM");
        throw;
    }
}

void ControlFlowLowerer::flush_segment(Scope& s, std::vector<const ir::Node*>& pending) {
    if (pending.empty()) return;
    std::vector<const ir::Node*> nodes;
    nodes.swap(pending);
    try {
        compile_segment(s, nodes);
    } catch (const Error& e) {
        interpret_segment(s, nodes, e.what());
    }
}

// The values `nodes` define that are read after them: by later nodes, by sub-graphs by name, or
// as function results.
std::vector<const ir::Value*> ControlFlowLowerer::segment_outputs(const Scope& s,
                                                                  const std::vector<const ir::Node*>& nodes) const {
    std::set<const ir::Node*> in_segment(nodes.begin(), nodes.end());
    std::set<const ir::Value*> is_output(s.g->outputs().begin(), s.g->outputs().end());
    std::vector<const ir::Value*> outs;
    for (const ir::Node* n : nodes)
        for (const ir::Value* o : n->outputs()) {
            bool used = is_output.count(o) || s.captured_later.count(o->name());
            for (const ir::Node* u : o->users()) used |= !in_segment.count(u);
            if (used) outs.push_back(o);
        }
    return outs;
}

// The nodes (consecutive, in order) become one graph compiled by compile(): its inputs are the
// registers they read, constants (own or captured) are copied in, its outputs are
// segment_outputs(). Throws when it does not compile.
void ControlFlowLowerer::compile_segment(Scope& s, const std::vector<const ir::Node*>& nodes) {
    ir::Graph sg;
    sg.name = fn(s).name + "/segment" + std::to_string(stats_.segments);
    std::unordered_map<const ir::Value*, ir::Value*> map;
    vm::Instr call{vm::Op::kCall};
    call.node = nodes.front()->describe() + (nodes.size() > 1 ? " and " + std::to_string(nodes.size() - 1) + " more" : "");
    for (const ir::Node* n : nodes) {
        std::vector<ir::Value*> ins;
        for (const ir::Value* v : n->inputs()) {
            if (!v) {
                ins.push_back(nullptr);
                continue;
            }
            auto it = map.find(v);
            if (it == map.end()) {
                if (const Tensor* c = constant_of(s, v)) {
                    it = map.emplace(v, sg.add_constant(v->name(), *c)).first;
                } else {
                    const int r = reg_of(s, v);
                    const vm::RegType& t = fn(s).types[static_cast<size_t>(r)];
                    KILN_CHECK(is_known(t), kUnsupported)
                        << n->describe() << " reads '" << v->name() << "', whose shape is not known when lowering";
                    it = map.emplace(v, sg.add_input(v->name(), ir_type_of(t))).first;
                    call.ins.push_back(r);
                }
            }
            ins.push_back(it->second);
        }
        std::vector<std::string> names;
        for (const ir::Value* o : n->outputs()) names.push_back(o->name());
        ir::Node* copy = sg.add_node(n->op(), ins, n->attrs(), std::vector<ir::TensorType>(n->num_outputs()), names,
                                     n->name());
        copy->set_role(n->role());
        op::infer_node(*copy);
        // Folded as it is added (shape arithmetic on the now static shapes), so that a later
        // node's value input (a Pad's pads computed from a Shape) is a constant when inferred.
        const bool folded = fold_constant_node(sg, copy);
        for (size_t k = 0; k < n->num_outputs(); ++k)
            map[n->output(k)] = folded ? sg.find_value(names[k]) : copy->output(k);
    }
    std::vector<const ir::Value*> outs = segment_outputs(s, nodes);
    // Values folded to constants are constant registers, not outputs (no copy per run), and an
    // If branching on one is decided now.
    std::vector<const ir::Value*> computed;
    for (const ir::Value* o : outs) {
        if (map.at(o)->is_constant())
            s.folded[o] = map.at(o)->constant();
        else
            computed.push_back(o);
    }
    outs.swap(computed);
    if (outs.empty()) return;  // dead code, or all folded
    for (const ir::Value* o : outs) sg.add_output(map.at(o));
    CompiledModel m = compile(sg, ctx_.compile);
    for (size_t k = 0; k < outs.size(); ++k) {
        const runtime::BufferDesc& b = m.executable->buffers[static_cast<size_t>(m.executable->outputs[k])];
        call.outs.push_back(s.reg[outs[k]] = new_reg(s, vm::RegType{b.dtype, b.shape}));
        if (b.role == runtime::BufferRole::kConstant) s.folded[outs[k]] = b.constant;  // an If may branch on it now
    }
    stats_.kernels += static_cast<int>(m.executable->steps.size());
    ++stats_.segments;
    call.imm = add_callee(std::make_shared<vm::ExecutableCallee>(m.executable, sg.name, ctx_.pool, ctx_.alloc));
    fn(s).code.push_back(std::move(call));
}

// What compile_segment() refused (a value input computed from run-time data, a shape known
// only at run time): the same nodes as a graph the interpreter runs, with the output types the
// model declares (unknown dims stay unknown: what reads them is interpreted too, and a loop
// checks its carried shapes at run time).
void ControlFlowLowerer::interpret_segment(Scope& s, const std::vector<const ir::Node*>& nodes, const std::string& why) {
    auto g = std::make_shared<ir::Graph>();
    g->name = fn(s).name + "/segment" + std::to_string(stats_.segments + stats_.segments_interpreted);
    std::unordered_map<const ir::Value*, ir::Value*> map;
    vm::Instr call{vm::Op::kCall};
    call.node = nodes.front()->describe() + (nodes.size() > 1 ? " and " + std::to_string(nodes.size() - 1) + " more" : "");
    for (const ir::Node* n : nodes) {
        std::vector<ir::Value*> ins;
        for (const ir::Value* v : n->inputs()) {
            auto it = v ? map.find(v) : map.end();
            if (v && it == map.end()) {
                if (const Tensor* c = constant_of(s, v)) {
                    it = map.emplace(v, g->add_constant(v->name(), *c)).first;
                } else {
                    const int r = reg_of(s, v);
                    const vm::RegType& t = fn(s).types[static_cast<size_t>(r)];
                    it = map.emplace(v, g->add_input(v->name(), is_known(t) ? ir_type_of(t) : v->type())).first;
                    call.ins.push_back(r);
                }
            }
            ins.push_back(v ? it->second : nullptr);
        }
        std::vector<std::string> names;
        std::vector<ir::TensorType> types;
        for (const ir::Value* o : n->outputs()) {
            names.push_back(o->name());
            types.push_back(o->type());
        }
        ir::Node* copy = g->add_node(n->op(), ins, n->attrs(), types, names, n->name());
        copy->set_role(n->role());
        for (size_t k = 0; k < n->num_outputs(); ++k) map[n->output(k)] = copy->output(k);
    }
    for (const ir::Value* o : segment_outputs(s, nodes)) {
        g->add_output(map.at(o));
        call.outs.push_back(s.reg[o] = new_reg(s, reg_type_of(o->type())));
    }
    if (call.outs.empty()) return;
    ++stats_.segments_interpreted;
    stats_.notes.push_back(g->name + " (" + call.node + ") runs in the graph interpreter: " + why.substr(0, why.find('\n')));
    call.imm = add_callee(std::make_shared<InterpretedCallee>(g, "does not compile", ctx_.pool, ctx_.alloc));
    fn(s).code.push_back(std::move(call));
}

}  // namespace kiln::compiler
