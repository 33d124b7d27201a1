// lower_control_flow (see lower_control_flow.h): the entry point, vm_refusal, and the lowering
// of If, Loop and Scan nodes (functions and segments: control_flow_lowerer.cc).
#include "compiler/lower_control_flow.h"

#include <algorithm>

#include "compiler/control_flow_lowerer.h"
#include "compiler/graph_interpreter.h"
#include "compiler/graph_plan.h"
#include "compiler/interpreted_callee.h"
#include "op/registry.h"

namespace kiln::compiler {
namespace {

bool plain_tensor(const ir::TensorType& t) { return t.is_tensor() && t.dtype != DType::kString; }

const ir::GraphAttr& graph_attr(const ir::Node& n, const std::string& name) {
    auto it = n.attrs().find(name);
    KILN_CHECK(it != n.attrs().end() && std::holds_alternative<ir::GraphAttr>(it->second), kInvalidModel)
        << n.describe() << " has no sub-graph attribute '" << name << "'";
    return std::get<ir::GraphAttr>(it->second);
}

// The names `g` reads from enclosing scopes: its outer inputs, and what its nodes' sub-graphs
// read that `g` does not define itself (a body's input `y` read by an If inside the body is not
// the enclosing graph's `y`).
void free_names(const ir::Graph& g, std::set<std::string>& out) {
    for (const ir::Value* v : g.outer_inputs()) out.insert(v->name());
    std::set<std::string> defined;
    for (const ir::Value* v : g.inputs()) defined.insert(v->name());
    for (const ir::Value* v : g.constants()) defined.insert(v->name());
    for (const ir::Node* n : g.nodes())
        for (const ir::Value* o : n->outputs()) defined.insert(o->name());
    for (const ir::Node* n : g.nodes())
        for (const auto& [k, a] : n->attrs()) {
            const auto* sub = std::get_if<ir::GraphAttr>(&a);
            if (!sub || !*sub) continue;
            std::set<std::string> inner;
            free_names(**sub, inner);
            for (const std::string& name : inner)
                if (!defined.count(name)) out.insert(name);
        }
}

}  // namespace

std::string vm_refusal(const ir::Graph& g) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    for (const ir::Value* v : g.inputs())
        if (!plain_tensor(v->type())) return "graph input '" + v->name() + "' is a " + v->type().str();
    for (const ir::Value* v : g.outputs())
        if (!plain_tensor(v->type())) return "graph output '" + v->name() + "' is a " + v->type().str();
    for (const ir::Value* v : g.constants())
        if (v->constant().dtype() == DType::kString) return "constant '" + v->name() + "' holds strings";
    bool any = false;
    for (const ir::Node* n : g.nodes()) {
        for (const ir::Value* o : n->outputs())
            if (!plain_tensor(o->type())) return n->describe() + " produces a " + o->type().str();
        if (is_control_flow_op(n->op())) {
            any = true;
            continue;
        }
        const op::OpDef* def = reg.find(n->op());
        if (def && !def->compute) return n->describe() + " runs on the host";
        if (has_graph_attr(*n)) return n->describe() + " has a sub-graph";
    }
    return any ? "" : "no If, Loop or Scan node";
}

std::set<std::string> shape_deciding_inputs(const ir::Graph& g) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    std::set<std::string> out;
    for (const ir::Value* in : g.inputs()) {
        std::set<const ir::Value*> reach{in};
        for (const ir::Node* n : g.nodes()) {
            const op::OpDef* def = reg.find(n->op());
            for (int vi : def ? def->value_inputs : std::vector<int>{}) {
                const ir::Value* v = n->input(static_cast<size_t>(vi));
                if (v && reach.count(v)) out.insert(in->name());
            }
            if (n->op() == "Shape" || n->op() == "Size") continue;
            bool reached = false;
            for (const ir::Value* v : n->inputs()) reached |= v && reach.count(v);
            std::set<std::string> captured;  // what a sub-graph reads counts as an input
            for (const auto& [k, a] : n->attrs())
                if (const auto* sub = std::get_if<ir::GraphAttr>(&a); sub && *sub) free_names(**sub, captured);
            for (const std::string& name : captured) reached |= reach.count(g.find_value(name)) > 0;
            if (reached)
                for (const ir::Value* o : n->outputs()) reach.insert(o);
        }
    }
    return out;
}

ControlFlowLowering lower_control_flow(const ir::Graph& g, const std::vector<Shape>& input_shapes,
                                       const LowerContext& ctx, const std::map<std::string, Tensor>& frozen) {
    KILN_CHECK(input_shapes.size() == g.inputs().size(), kInvalidArgument)
        << "lower_control_flow: " << input_shapes.size() << " input shapes for " << g.inputs().size() << " inputs";
    std::vector<vm::RegType> types;
    for (size_t i = 0; i < input_shapes.size(); ++i) types.push_back({g.inputs()[i]->type().dtype, input_shapes[i]});
    ControlFlowLowerer lowerer(ctx);
    const int entry = lowerer.lower_function(g, g.name.empty() ? "main" : g.name, types, {}, &frozen);
    return lowerer.finish(entry);
}

// The names `n`'s sub-graphs read from this scope, each as a register or a constant.
std::vector<Captured> ControlFlowLowerer::captured_of(Scope& s, const ir::Node& n) {
    std::set<std::string> names;
    for (const auto& [k, a] : n.attrs())
        if (const auto* sub = std::get_if<ir::GraphAttr>(&a); sub && *sub) free_names(**sub, names);
    std::vector<Captured> out;
    for (const std::string& name : names) {
        const ir::Value* v = s.g->find_value(name);
        Captured c;
        c.name = name;
        if (v && constant_of(s, v)) {
            c.constant = *constant_of(s, v);
            c.type = {c.constant.dtype(), c.constant.shape()};
        } else if (v || s.outer.count(name)) {
            c.reg = v ? reg_of(s, v) : s.outer.at(name);
            c.type = fn(s).types[static_cast<size_t>(c.reg)];
        } else if (s.consts.count(name)) {
            c.constant = s.consts.at(name);
            c.type = {c.constant.dtype(), c.constant.shape()};
        } else {
            continue;  // defined inside an intermediate sub-graph
        }
        out.push_back(std::move(c));
    }
    return out;
}

void ControlFlowLowerer::lower_if(Scope& s, const ir::Node& n) {
    const std::vector<Captured> cap = captured_of(s, n);
    vm::Instr in{vm::Op::kIf};
    in.node = n.describe();
    in.ins.push_back(reg_of(s, n.input(0)));
    for (const Captured& c : cap)
        if (c.reg >= 0) in.ins.push_back(c.reg);
    int branch_fn[2] = {-1, -1};
    const char* names[2] = {"then_branch", "else_branch"};
    // A condition known now (shape arithmetic folded at these shapes): only its branch is lowered.
    const Tensor* known = constant_of(s, n.input(0));
    for (int b = 0; b < 2; ++b) {
        if (known && known->numel() == 1 && (known->get_f64(0) != 0.0) != (b == 0)) continue;
        const ir::GraphAttr& branch = graph_attr(n, names[b]);
        const std::string fname = fn(s).name + "/" + (n.name().empty() ? n.output(0)->name() : n.name()) + "/" + names[b];
        try {
            branch_fn[b] = lower_function(*branch, fname, {}, cap);
            ++stats_.bodies_compiled;
        } catch (const Error& e) {
            branch_fn[b] = interpreted_branch(branch, fname, cap, e.what());
        }
    }
    in.imm = branch_fn[0] >= 0 ? branch_fn[0] : branch_fn[1];
    in.imm2 = branch_fn[1] >= 0 ? branch_fn[1] : branch_fn[0];
    // Output types: the branches' where they agree, a compiled branch's where the other is
    // interpreted (its shapes are checked by whatever reads them), unknown otherwise.
    for (size_t k = 0; k < n.num_outputs(); ++k) {
        const vm::RegType& t = function(in.imm).types[static_cast<size_t>(function(in.imm).results.at(k))];
        const vm::RegType& e = function(in.imm2).types[static_cast<size_t>(function(in.imm2).results.at(k))];
        vm::RegType out = is_known(t) ? t : e;
        if (is_known(t) && is_known(e) && (t.shape != e.shape || t.dtype != e.dtype)) out.shape.assign(1, -1);
        in.outs.push_back(s.reg[n.output(k)] = new_reg(s, out));
        // A branch decided now whose result folded: the If's output is that constant too.
        if (in.imm == in.imm2 && constant_results_[in.imm].count(k)) s.folded[n.output(k)] = constant_results_[in.imm].at(k);
    }
    fn(s).code.push_back(std::move(in));
}

int ControlFlowLowerer::interpreted_branch(const ir::GraphAttr& branch, const std::string& name,
                                           const std::vector<Captured>& cap, const std::string& why) {
    std::vector<std::pair<std::string, ir::TensorType>> inputs;
    std::vector<std::pair<std::string, Tensor>> constants{{"__kiln_true", Tensor(DType::kBool, {})}};
    constants[0].second.set_i64(0, 1);
    for (const Captured& c : cap) {
        if (c.reg >= 0)
            inputs.emplace_back(c.name, ir_type_of(c.type));
        else
            constants.emplace_back(c.name, c.constant);
    }
    // If(true) over the branch: the interpreter binds the captured names to these inputs.
    ir::AttrMap attrs{{"then_branch", branch}, {"else_branch", branch}};
    auto g = one_node_graph_of("If", attrs, {"__kiln_true"}, branch->outputs().size(), inputs, constants, name);
    program_->functions.emplace_back();
    Scope s;
    s.fn = static_cast<int>(program_->functions.size()) - 1;
    fn(s).name = name;
    vm::Instr call{vm::Op::kCall};
    call.node = "graph '" + name + "'";
    for (const Captured& c : cap)
        if (c.reg >= 0) {
            call.ins.push_back(new_reg(s, c.type));
            fn(s).params.push_back(call.ins.back());
        }
    for (const ir::Value* o : branch->outputs()) call.outs.push_back(new_reg(s, reg_type_of(o->type())));
    fn(s).results = call.outs;
    call.imm = add_callee(std::make_shared<InterpretedCallee>(g, "does not compile", ctx_.pool, ctx_.alloc));
    fn(s).code.push_back(std::move(call));
    fn(s).code.push_back(vm::Instr{vm::Op::kRet});
    ++stats_.bodies_interpreted;
    stats_.notes.push_back(name + " runs in the graph interpreter: " + why.substr(0, why.find('\n')));
    return s.fn;
}

}  // namespace kiln::compiler
