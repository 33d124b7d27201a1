// GraphInterpreter (see graph_interpreter.h).
//
// A Frame is one running (sub-)graph: its values by ir::Value*, and the frame of the graph whose
// node runs it. Outer-scope values of a sub-graph are bound by name from the enclosing frames when
// the frame starts. Values are dropped after their last use in the frame.
#include "compiler/graph_interpreter.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "compiler/compile.h"
#include "ir/attr.h"
#include "op/registry.h"
#include "runtime/sequential_executor.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::compiler {
namespace {

bool is_plain_tensor_type(const ir::TensorType& t) { return t.is_tensor() && t.dtype != DType::kString; }

bool has_graph_attr(const ir::Node& n) {
    for (const auto& [k, a] : n.attrs())
        if (std::holds_alternative<ir::GraphAttr>(a)) return true;
    return false;
}

// Names a node's sub-graphs (and theirs, recursively) read from enclosing scopes.
void captured_names(const ir::Node& n, std::set<std::string>& out) {
    for (const auto& [k, a] : n.attrs()) {
        const auto* g = std::get_if<ir::GraphAttr>(&a);
        if (!g || !*g) continue;
        for (const ir::Value* v : (*g)->outer_inputs()) out.insert(v->name());
        for (const ir::Node* inner : (*g)->nodes()) captured_names(*inner, out);
    }
}

// "Range(i64[], f32[3], none)" for error messages.
std::string signature_str(const ir::Node& n, const std::vector<Datum>& inputs) {
    std::string s = n.op() + "(";
    for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].str();
    return s + ")";
}

}  // namespace

std::string host_only_reason(const ir::Graph& g) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    for (const ir::Value* v : g.inputs())
        if (!is_plain_tensor_type(v->type()))
            return "graph input '" + v->name() + "' is a " + v->type().str();
    for (const ir::Value* v : g.outputs())
        if (!is_plain_tensor_type(v->type()))
            return "graph output '" + v->name() + "' is a " + v->type().str();
    for (const ir::Value* v : g.constants())
        if (v->constant().dtype() == DType::kString) return "constant '" + v->name() + "' holds strings";
    for (const ir::Node* n : g.nodes()) {
        const op::OpDef* def = reg.find(n->op());
        if (!def) continue;  // the session reports unknown ops
        if (!def->compute) return n->describe() + " runs on the host (data-dependent output shape, strings or sequences)";
        if (has_graph_attr(*n)) return n->describe() + " has a sub-graph";
        for (const ir::Value* o : n->outputs())
            if (!is_plain_tensor_type(o->type()))
                return n->describe() + " produces a " + o->type().str();
    }
    return "";
}

std::set<std::string> value_fed_inputs(const ir::Graph& g) {
    std::set<std::string> out;
    const op::OpRegistry& reg = op::OpRegistry::global();
    for (const ir::Node* n : g.nodes()) {
        const op::OpDef* def = reg.find(n->op());
        if (!def) continue;
        for (int vi : def->value_inputs) {
            const ir::Value* v = n->input(static_cast<size_t>(vi));
            if (v && v->is_graph_input()) out.insert(v->name());
        }
    }
    return out;
}

std::string interpreter_reason(const ir::Graph& g, const std::vector<std::string>& frozen_inputs) {
    if (std::string why = host_only_reason(g); !why.empty()) return why;
    // Values whose contents depend on a (not frozen) graph input's data; Shape and Size read only
    // shapes, which compile() knows.
    const op::OpRegistry& reg = op::OpRegistry::global();
    std::set<const ir::Value*> data_dependent;
    for (const ir::Value* v : g.inputs())
        if (std::find(frozen_inputs.begin(), frozen_inputs.end(), v->name()) == frozen_inputs.end())
            data_dependent.insert(v);
    for (const ir::Node* n : g.nodes()) {
        const op::OpDef* def = reg.find(n->op());
        if (!def) continue;
        for (int vi : def->value_inputs) {
            const ir::Value* in = n->input(static_cast<size_t>(vi));
            if (in && data_dependent.count(in) && !in->is_graph_input())
                return n->describe() + " reads input " + std::to_string(vi) + " ('" + in->name() +
                       "') as a shape-determining value, and it is computed from run-time data";
        }
        if (n->op() == "Shape" || n->op() == "Size") continue;
        bool dep = false;
        for (const ir::Value* in : n->inputs()) dep |= in && data_dependent.count(in);
        if (dep)
            for (const ir::Value* o : n->outputs()) data_dependent.insert(o);
    }
    return "";
}

struct GraphInterpreter::Frame {
    const ir::Graph* graph;
    const Frame* parent;
    std::unordered_map<const ir::Value*, Datum> env;

    const Datum* find(const std::string& name) const {
        for (const Frame* f = this; f; f = f->parent) {
            const ir::Value* v = f->graph->find_value(name);
            if (!v) continue;
            auto it = f->env.find(v);
            if (it != f->env.end()) return &it->second;
        }
        return nullptr;
    }
};

// One node specialized to its input types (and value-input values): a lowered function for the
// tir interpreter, or a compiled one-node executable.
struct GraphInterpreter::SpecializedNode {
    std::vector<size_t> runtime_slots;  // node input slots passed at run time, in order
    std::vector<ir::TensorType> output_types;
    tir::PrimFunc func;                                   // interpreted, or
    std::unique_ptr<runtime::SequentialExecutor> executor;  // compiled
};

GraphInterpreter::GraphInterpreter(std::shared_ptr<const ir::Graph> g, runtime::ThreadPool* pool,
                                   runtime::Allocator* alloc)
    : graph_(std::move(g)), pool_(pool), alloc_(alloc) {}

GraphInterpreter::~GraphInterpreter() = default;

std::vector<Datum> GraphInterpreter::run(const std::vector<Datum>& inputs) {
    return run_graph(*graph_, inputs, nullptr);
}

std::vector<Datum> GraphInterpreter::run_graph(const ir::Graph& g, const std::vector<Datum>& inputs, const Frame* parent) {
    KILN_CHECK(inputs.size() <= g.inputs().size(), kInvalidArgument)
        << "graph '" << g.name << "' takes " << g.inputs().size() << " inputs, got " << inputs.size();
    Frame frame{&g, parent, {}};
    for (size_t i = 0; i < g.inputs().size(); ++i) frame.env[g.inputs()[i]] = i < inputs.size() ? inputs[i] : Datum::none();
    for (const ir::Value* c : g.constants()) frame.env[c] = Datum(c->constant());
    for (const ir::Value* v : g.outer_inputs()) {
        const Datum* d = parent ? parent->find(v->name()) : nullptr;
        KILN_CHECK(d != nullptr, kInvalidModel)
            << "graph '" << g.name << "' reads '" << v->name() << "' from an enclosing scope, which does not define it";
        frame.env[v] = *d;
    }
    // Last use of each value, so large intermediates are released as the frame goes.
    std::vector<ir::Node*> nodes = g.nodes();
    std::unordered_map<const ir::Value*, size_t> last_use;
    for (size_t i = 0; i < nodes.size(); ++i) {
        for (const ir::Value* in : nodes[i]->inputs())
            if (in) last_use[in] = i;
        std::set<std::string> captured;  // a sub-graph reading a value by name uses it here too
        captured_names(*nodes[i], captured);
        for (const std::string& name : captured)
            if (const ir::Value* v = g.find_value(name)) last_use[v] = i;
    }
    std::set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
    std::vector<std::vector<const ir::Value*>> release(nodes.size());  // values dead after node i
    for (const auto& [v, last] : last_use)
        if (!outputs.count(v) && !v->is_constant()) release[last].push_back(v);

    for (size_t i = 0; i < nodes.size(); ++i) {
        const ir::Node& n = *nodes[i];
        std::vector<Datum> ins;
        for (size_t s = 0; s < n.num_inputs(); ++s) {
            const ir::Value* v = n.input(s);
            if (!v) {
                ins.push_back(Datum::none());
                continue;
            }
            auto it = frame.env.find(v);
            KILN_ICHECK(it != frame.env.end()) << n.describe() << " reads '" << v->name() << "' before it is computed";
            ins.push_back(it->second);
        }
        std::vector<Datum> outs;
        try {
            outs = run_node(n, ins, frame);
        } catch (Error& e) {
            e.add_context("while running " + n.describe() + (g.name.empty() ? "" : " in graph '" + g.name + "'"));
            throw;
        }
        KILN_CHECK(outs.size() == n.num_outputs(), kInternal)
            << n.describe() << ": produced " << outs.size() << " values for " << n.num_outputs() << " outputs";
        for (size_t o = 0; o < outs.size(); ++o) frame.env[n.output(o)] = std::move(outs[o]);
        for (const ir::Value* v : release[i]) frame.env.erase(v);
    }
    std::vector<Datum> result;
    for (const ir::Value* v : g.outputs()) {
        auto it = frame.env.find(v);
        KILN_ICHECK(it != frame.env.end()) << "graph output '" << v->name() << "' was not computed";
        result.push_back(it->second);
    }
    return result;
}

std::vector<Datum> GraphInterpreter::run_node(const ir::Node& n, const std::vector<Datum>& inputs, const Frame& frame) {
    const op::OpDef* def = op::OpRegistry::global().find(n.op());
    KILN_CHECK(def != nullptr, kUnsupported) << "unsupported op '" << n.op() << "' (" << n.describe() << ")";
    bool plain = true;
    for (const Datum& d : inputs) plain &= d.is_none() || (d.is_tensor() && d.tensor().dtype() != DType::kString);
    // An omitted optional input is none too; a compute handles that. A present empty optional is
    // indistinguishable here, and only host kernels take optionals.
    if (def->host && (!def->compute || !plain)) {
        ++counts_.host;
        op::HostArgs args{n, inputs, [this, &frame](const ir::Graph& sub, const std::vector<Datum>& ins) {
                              return run_graph(sub, ins, &frame);
                          }};
        return def->host(args);
    }
    KILN_CHECK(def->compute != nullptr, kUnsupported) << n.describe() << " has no host kernel and no compute";
    KILN_CHECK(plain, kUnsupported) << n.describe() << " (" << signature_str(n, inputs)
                                    << "): Kiln runs this op on numeric tensors only";
    return eval_compute(n, *def, inputs);
}

std::vector<Datum> GraphInterpreter::eval_compute(const ir::Node& n, const op::OpDef& def,
                                                  const std::vector<Datum>& inputs) {
    const std::set<int> value_slots(def.value_inputs.begin(), def.value_inputs.end());
    // The specialization: op, attributes, input types, and the values of the value inputs (the
    // only inputs a compute may read as data: the rest are graph inputs of the one-node graph).
    // The op-and-attributes part is the node's, printed once (a Loop body runs it many times).
    auto prefix = node_keys_.find(&n);
    if (prefix == node_keys_.end()) {
        std::string p = n.op() + "|";
        for (const auto& [k, a] : n.attrs()) p += k + "=" + ir::attr_str(a) + ";";
        prefix = node_keys_.emplace(&n, std::move(p)).first;
    }
    std::ostringstream key;
    key << prefix->second;
    int64_t elements = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].is_none()) {
            key << "|-";
            continue;
        }
        const Tensor& t = inputs[i].tensor();
        elements += t.numel();
        key << "|" << dtype_name(t.dtype()) << shape_str(t.shape());
        if (value_slots.count(static_cast<int>(i))) key << "=" << ir::tensor_data_str(t);
    }
    auto it = specialized_.find(key.str());
    if (it == specialized_.end())
        it = specialized_.emplace(key.str(), specialize(n, def, value_slots, inputs, elements)).first;
    SpecializedNode& sn = *it->second;

    if (sn.executor) {
        ++counts_.compiled;
        std::vector<Tensor> feeds, outs;
        for (size_t s : sn.runtime_slots) feeds.push_back(inputs[s].tensor());
        sn.executor->run(feeds, outs).throw_if_error();
        return std::vector<Datum>(outs.begin(), outs.end());
    }
    ++counts_.interpreted;
    std::vector<Tensor> buffers;
    for (size_t s : sn.runtime_slots) buffers.push_back(inputs[s].tensor());
    for (const ir::TensorType& t : sn.output_types) buffers.emplace_back(t.dtype, t.static_shape());
    tir::interpret(sn.func, buffers);
    return std::vector<Datum>(buffers.end() - static_cast<std::ptrdiff_t>(sn.output_types.size()), buffers.end());
}

std::unique_ptr<GraphInterpreter::SpecializedNode> GraphInterpreter::specialize(const ir::Node& n, const op::OpDef& def,
                                                                                const std::set<int>& value_slots,
                                                                                const std::vector<Datum>& inputs,
                                                                                int64_t input_elements) {
    auto sn = std::make_unique<SpecializedNode>();
    ir::Graph g;
    g.name = n.op();
    std::vector<ir::Value*> ins;
    std::vector<size_t> graph_input_slots;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].is_none()) {
            ins.push_back(nullptr);
            continue;
        }
        const Tensor& t = inputs[i].tensor();
        const std::string name = "in" + std::to_string(i);
        if (value_slots.count(static_cast<int>(i))) {
            ins.push_back(g.add_constant(name, t.clone()));
        } else {
            ins.push_back(g.add_input(name, ir::TensorType::of_static(t.dtype(), t.shape())));
            graph_input_slots.push_back(i);
        }
    }
    while (!ins.empty() && ins.back() == nullptr) ins.pop_back();
    ir::Node* node = g.add_node(n.op(), ins, n.attrs(), std::vector<ir::TensorType>(n.num_outputs()), {}, n.name());
    op::infer_node(*node);
    int64_t output_elements = 0;
    for (ir::Value* o : node->outputs()) {
        g.add_output(o);
        sn->output_types.push_back(o->type());
        output_elements += shape_numel(o->type().static_shape());
    }
    const double work = def.flops ? def.flops(*node) : static_cast<double>(output_elements);

    if (input_elements <= kInterpretElements && output_elements <= kInterpretElements && work <= kInterpretWork) {
        // Lower the op's compute unscheduled, once, for the tir interpreter.
        op::ComputeArgs args{*node, {}, sn->output_types};
        for (size_t i = 0; i < node->num_inputs(); ++i) {
            const ir::Value* v = node->input(i);
            args.inputs.push_back(v ? te::placeholder(v->type().static_shape(), v->type().dtype, "in" + std::to_string(i))
                                    : nullptr);
        }
        std::vector<te::Tensor> outs = def.compute(args);
        KILN_CHECK(outs.size() == node->num_outputs(), kInternal)
            << n.describe() << ": compute gave " << outs.size() << " tensors for " << node->num_outputs() << " outputs";
        std::vector<te::Tensor> params;
        for (size_t slot : graph_input_slots) params.push_back(args.inputs[slot]);
        params.insert(params.end(), outs.begin(), outs.end());
        sn->func = tir::simplify(tir::lower(te::create_schedule(outs), params, "interp_" + n.op()));
        sn->runtime_slots = graph_input_slots;
        return sn;
    }
    CompileOptions opts;
    opts.opt_level = 0;
    opts.compile_jobs = 1;
    CompiledModel m = compile(g, opts);
    sn->executor = std::make_unique<runtime::SequentialExecutor>(m.executable, pool_, alloc_);
    sn->runtime_slots = graph_input_slots;
    ++counts_.compiles;
    return sn;
}

}  // namespace kiln::compiler
