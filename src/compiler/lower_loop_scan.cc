// ControlFlowLowerer: Loop and Scan nodes, and the fallback that runs a node whole in the graph
// interpreter (see lower_control_flow.h).
#include <algorithm>
#include <optional>

#include "compiler/control_flow_lowerer.h"
#include "compiler/interpreted_callee.h"

namespace kiln::compiler {
namespace {

std::string type_str(const vm::RegType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

const ir::GraphAttr* body_attr(const ir::Node& n) {
    auto it = n.attrs().find("body");
    if (it == n.attrs().end() || !std::holds_alternative<ir::GraphAttr>(it->second)) return nullptr;
    return &std::get<ir::GraphAttr>(it->second);
}

// Scan outputs get registers of their own that the body writes last: the VM points them at
// their slices before each iteration, so none may be a param, a constant or another result.
void separate_scan_results(vm::Function& f, size_t first_scan) {
    std::vector<char> is_param(static_cast<size_t>(f.num_regs), 0);
    for (int p : f.params) is_param[static_cast<size_t>(p)] = 1;
    for (const auto& [r, t] : f.constants) is_param[static_cast<size_t>(r)] = 1;
    f.code.pop_back();  // kRet
    for (size_t k = first_scan; k < f.results.size(); ++k) {
        const int r = f.results[k];
        bool shared = is_param[static_cast<size_t>(r)];
        for (size_t j = 0; j < f.results.size(); ++j) shared |= j != k && f.results[j] == r;
        if (!shared) continue;
        vm::Instr mv{vm::Op::kMove};
        mv.ins = {r};
        f.types.push_back(f.types[static_cast<size_t>(r)]);
        mv.outs = {f.num_regs++};
        f.results[k] = mv.outs[0];
        f.code.push_back(std::move(mv));
    }
    f.code.push_back(vm::Instr{vm::Op::kRet});
}

}  // namespace

void ControlFlowLowerer::interpret_node(Scope& s, const ir::Node& n, const std::vector<Captured>& cap,
                                        const std::string& why) {
    std::vector<std::pair<std::string, ir::TensorType>> inputs;
    std::vector<std::pair<std::string, Tensor>> constants;
    std::vector<std::string> node_inputs;
    std::set<std::string> bound;
    vm::Instr call{vm::Op::kCall};
    call.node = n.describe();
    auto bind = [&](const std::string& name, int reg, const Tensor* c) {
        if (!bound.insert(name).second) return;
        if (c) {
            constants.emplace_back(name, *c);
            return;
        }
        inputs.emplace_back(name, ir_type_of(fn(s).types[static_cast<size_t>(reg)]));
        call.ins.push_back(reg);
    };
    for (const ir::Value* v : n.inputs()) {
        node_inputs.push_back(v ? v->name() : "");
        if (!v) continue;
        const Tensor* c = constant_of(s, v);
        bind(v->name(), c ? -1 : reg_of(s, v), c);
    }
    for (const Captured& c : cap) bind(c.name, c.reg, c.reg < 0 ? &c.constant : nullptr);
    auto g = one_node_graph_of(n.op(), n.attrs(), node_inputs, n.num_outputs(), inputs, constants, n.name());
    for (const ir::Value* o : n.outputs()) call.outs.push_back(s.reg[o] = new_reg(s, reg_type_of(o->type())));
    call.imm = add_callee(std::make_shared<InterpretedCallee>(g, "interpreted", ctx_.pool, ctx_.alloc));
    fn(s).code.push_back(std::move(call));
    ++stats_.bodies_interpreted;
    stats_.notes.push_back(n.describe() + " runs in the graph interpreter: " + why.substr(0, why.find('\n')));
}

std::optional<int> ControlFlowLowerer::lower_body(Scope& s, const ir::Node& n, const ir::Graph& body,
                                                  const std::vector<vm::RegType>& params,
                                                  const std::vector<Captured>& cap) {
    try {
        return lower_function(body, fn(s).name + "/" + (n.name().empty() ? n.output(0)->name() : n.name()) + "/body",
                              params, cap);
    } catch (const Error& e) {
        interpret_node(s, n, cap, e.what());
        return std::nullopt;
    }
}

void ControlFlowLowerer::lower_loop(Scope& s, const ir::Node& n) {
    const std::vector<Captured> cap = captured_of(s, n);
    const ir::GraphAttr* body = body_attr(n);
    KILN_CHECK(body != nullptr, kInvalidModel) << n.describe() << " has no body";
    const size_t nc = n.num_inputs() > 2 ? n.num_inputs() - 2 : 0;
    std::vector<vm::RegType> params{{DType::kInt64, {}}, {DType::kBool, {}}};
    vm::Instr in{vm::Op::kLoop};
    in.node = n.describe();
    in.ins.push_back(n.input(0) ? reg_of(s, n.input(0)) : -1);
    in.ins.push_back(n.input(1) ? reg_of(s, n.input(1)) : -1);
    for (size_t k = 0; k < nc; ++k) {
        in.ins.push_back(reg_of(s, n.input(2 + k)));
        params.push_back(fn(s).types[static_cast<size_t>(in.ins.back())]);
        if (!is_known(params.back())) return interpret_node(s, n, cap, "a loop-carried value's shape is not known");
    }
    if (in.ins[0] < 0 && in.ins[1] < 0) return interpret_node(s, n, cap, "neither a trip count nor a condition");
    const std::optional<int> body_fn = lower_body(s, n, **body, params, cap);
    if (!body_fn) return;
    vm::Function& f = program_->functions[static_cast<size_t>(*body_fn)];
    for (size_t k = 0; k < nc; ++k) {
        const vm::RegType& got = f.types[static_cast<size_t>(f.results.at(1 + k))];
        // Unknown (an interpreted segment's output): the VM checks the shape every iteration.
        if (is_known(got) && (got.shape != params[2 + k].shape || got.dtype != params[2 + k].dtype))
            return interpret_node(s, n, cap, "the body turns loop-carried value " + std::to_string(k) + " from " +
                                                 type_str(params[2 + k]) + " into " + type_str(got));
    }
    separate_scan_results(f, 1 + nc);
    ++stats_.bodies_compiled;
    in.imm = *body_fn;
    in.imm2 = static_cast<int>(nc);
    for (const Captured& c : cap)
        if (c.reg >= 0) in.ins.push_back(c.reg);
    // A scan output has M slices when M is a constant and no condition can stop the loop early.
    int64_t trips = -1;
    if (n.input(0) && !n.input(1))
        if (const Tensor* m = constant_of(s, n.input(0))) trips = std::max<int64_t>(0, m->get_i64(0));
    for (size_t k = 0; k < n.num_outputs(); ++k) {
        vm::RegType t = k < nc ? params[2 + k] : f.types[static_cast<size_t>(f.results[1 + k])];
        if (k >= nc) t.shape.insert(t.shape.begin(), trips);
        in.outs.push_back(s.reg[n.output(k)] = new_reg(s, t));
    }
    fn(s).code.push_back(std::move(in));
}

// Scan-9+ (Scan-8, with its batch axis and sequence_lens, runs in the graph interpreter).
void ControlFlowLowerer::lower_scan(Scope& s, const ir::Node& n) {
    const std::vector<Captured> cap = captured_of(s, n);
    const ir::GraphAttr* body = body_attr(n);
    KILN_CHECK(body != nullptr, kInvalidModel) << n.describe() << " has no body";
    if (n.has_attr("directions") || n.num_inputs() == (*body)->inputs().size() + 1)
        return interpret_node(s, n, cap, "Scan-8 (batch axis, sequence_lens)");
    const int64_t m = n.attr_int("num_scan_inputs", 0);
    KILN_CHECK(m >= 1 && static_cast<size_t>(m) <= n.num_inputs(), kInvalidModel)
        << n.describe() << ": num_scan_inputs " << m << " with " << n.num_inputs() << " inputs";
    const size_t nin = static_cast<size_t>(m), ns = n.num_inputs() - nin;
    KILN_CHECK(n.num_outputs() >= ns, kInvalidModel) << n.describe() << ": fewer outputs than states";
    const size_t nout = n.num_outputs() - ns;
    const std::vector<int64_t> in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(nin, 0));
    const std::vector<int64_t> in_dirs = n.attr_ints("scan_input_directions", std::vector<int64_t>(nin, 0));
    const std::vector<int64_t> out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(nout, 0));
    const std::vector<int64_t> out_dirs = n.attr_ints("scan_output_directions", std::vector<int64_t>(nout, 0));
    KILN_CHECK(in_axes.size() == nin && in_dirs.size() == nin && out_axes.size() == nout && out_dirs.size() == nout,
               kInvalidModel)
        << n.describe() << ": scan axis/direction attributes do not match the number of scan inputs and outputs";
    vm::Instr in{vm::Op::kScan};
    in.node = n.describe();
    in.ints = {static_cast<int64_t>(ns), m};
    std::vector<vm::RegType> params;
    int64_t steps = -1;
    std::vector<int64_t> axes;
    for (size_t j = 0; j < n.num_inputs(); ++j) {
        in.ins.push_back(reg_of(s, n.input(j)));
        vm::RegType t = fn(s).types[static_cast<size_t>(in.ins.back())];
        if (!is_known(t)) return interpret_node(s, n, cap, "an input's shape is not known");
        if (j >= ns) {
            const int64_t rank = static_cast<int64_t>(t.shape.size());
            const int64_t axis = in_axes[j - ns] < 0 ? in_axes[j - ns] + rank : in_axes[j - ns];
            KILN_CHECK(axis >= 0 && axis < rank, kInvalidModel)
                << n.describe() << ": scan_input_axes[" << j - ns << "] = " << in_axes[j - ns] << " for rank " << rank;
            steps = t.shape[static_cast<size_t>(axis)];
            t.shape.erase(t.shape.begin() + axis);
            axes.push_back(axis);
        }
        params.push_back(t);
    }
    in.ints.insert(in.ints.end(), axes.begin(), axes.end());
    in.ints.insert(in.ints.end(), in_dirs.begin(), in_dirs.end());
    const std::optional<int> body_fn = lower_body(s, n, **body, params, cap);
    if (!body_fn) return;
    vm::Function& f = program_->functions[static_cast<size_t>(*body_fn)];
    for (size_t k = 0; k < ns; ++k) {
        const vm::RegType& got = f.types[static_cast<size_t>(f.results.at(k))];
        if (is_known(got) && (got.shape != params[k].shape || got.dtype != params[k].dtype))
            return interpret_node(s, n, cap, "the body turns state " + std::to_string(k) + " from " + type_str(params[k]) +
                                                 " into " + type_str(got));
    }
    separate_scan_results(f, ns);
    ++stats_.bodies_compiled;
    in.imm = *body_fn;
    for (const Captured& c : cap)
        if (c.reg >= 0) in.ins.push_back(c.reg);
    for (size_t k = 0; k < n.num_outputs(); ++k) {
        vm::RegType t = f.types[static_cast<size_t>(f.results[k])];
        if (k >= ns) {
            const int64_t rank = static_cast<int64_t>(t.shape.size()) + 1;
            const int64_t axis = out_axes[k - ns] < 0 ? out_axes[k - ns] + rank : out_axes[k - ns];
            KILN_CHECK(axis >= 0 && axis < rank, kInvalidModel)
                << n.describe() << ": scan_output_axes[" << k - ns << "] = " << out_axes[k - ns] << " for rank " << rank;
            in.ints.push_back(axis);
            t.shape.insert(t.shape.begin() + axis, steps);
        }
        in.outs.push_back(s.reg[n.output(k)] = new_reg(s, t));
    }
    in.ints.insert(in.ints.end(), out_dirs.begin(), out_dirs.end());
    fn(s).code.push_back(std::move(in));
}

}  // namespace kiln::compiler
