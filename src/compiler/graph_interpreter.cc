// GraphInterpreter (see graph_interpreter.h).
//
// A Frame is one running (sub-)graph: its values by slot (compiler/graph_plan.h), and the frame
// of the graph whose node runs it. Outer-scope values of a sub-graph are bound by name from the
// enclosing frames when the frame starts. Values are dropped after their last use in the frame.
#include "compiler/graph_interpreter.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "compiler/compile.h"
#include "compiler/graph_plan.h"
#include "ir/attr.h"
#include "op/registry.h"
#include "op/view_ops.h"
#include "runtime/sequential_executor.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::compiler {
namespace {

bool is_plain_tensor_type(const ir::TensorType& t) { return t.is_tensor() && t.dtype != DType::kString; }

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
        if (def->frame_control) continue;  // a control step of the frames executor
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
    const GraphPlan* plan;
    const Frame* parent;
    std::vector<Datum> env;   // by slot - constants.size()
    std::vector<char> set;    // whether env[i] holds a computed value

    const Datum* at(int slot) const {
        const size_t nc = plan->constants.size();
        if (static_cast<size_t>(slot) < nc) return &plan->constants[static_cast<size_t>(slot)];
        const size_t i = static_cast<size_t>(slot) - nc;
        return set[i] ? &env[i] : nullptr;
    }
    void put(int slot, Datum d) {
        const size_t i = static_cast<size_t>(slot) - plan->constants.size();
        env[i] = std::move(d);
        set[i] = 1;
    }
    void drop(int slot) {
        const size_t i = static_cast<size_t>(slot) - plan->constants.size();
        env[i] = Datum();
        set[i] = 0;
    }
    const Datum* find(const std::string& name) const {
        auto [f, slot] = locate(name);
        return f ? f->at(slot) : nullptr;
    }
    /// Whether `name` resolves to a value with the same data on every run (GraphPlan::fixed).
    bool is_fixed(const std::string& name) const {
        auto [f, slot] = locate(name);
        return f && f->plan->fixed_slot[static_cast<size_t>(slot)];
    }
    /// The innermost frame defining `name`, and the value's slot there.
    std::pair<const Frame*, int> locate(const std::string& name) const {
        for (const Frame* f = this; f; f = f->parent) {
            const ir::Value* v = f->graph->find_value(name);
            if (!v) continue;
            auto it = f->plan->slot.find(v);
            if (it == f->plan->slot.end() || !f->at(it->second)) continue;
            return {f, it->second};
        }
        return {nullptr, -1};
    }
};

// One node specialized to its input types (and value-input values): a prepared function for
// the tir interpreter, or a compiled one-node executable.
struct GraphInterpreter::SpecializedNode {
    std::vector<size_t> runtime_slots;  // node input slots passed at run time, in order
    std::vector<ir::TensorType> output_types;
    tir::PreparedFunc func;                                 // interpreted, or
    std::unique_ptr<runtime::SequentialExecutor> executor;  // compiled, or
    bool view = false;  // output 0 is input 0 under another shape (op/view_ops.h is_view_op)
    int interpreted_runs = 0;
    bool compile_when_hot = false;  // interpreted now, compiled on its kHotRuns-th run
};

// A node's last specialization, matched against each run's inputs before any key is built (a
// Loop body or a stream of VAD chunks brings the same types every time).
struct GraphInterpreter::NodeCache {
    struct Input {
        bool none = true;
        DType dtype = DType::kFloat32;
        Shape shape;
        Tensor data;  // a copy, for a value input
    };
    std::string prefix;  // op and attributes, the start of every key of this node
    std::set<int> value_slots;
    std::set<int> fixed_slots;  // inputs with the same data every run (GraphPlan::fixed)
    std::vector<Input> last_inputs;  // of the last specialization
    SpecializedNode* last = nullptr;
};

GraphInterpreter::GraphInterpreter(std::shared_ptr<const ir::Graph> g, runtime::ThreadPool* pool,
                                   runtime::Allocator* alloc)
    : graph_(std::move(g)), pool_(pool), alloc_(alloc) {}

GraphInterpreter::~GraphInterpreter() = default;

std::vector<Datum> GraphInterpreter::run(const std::vector<Datum>& inputs) {
    return run_graph(*graph_, inputs, nullptr);
}

// A sub-graph's plan is built on its first run, when the frames it reads outer values from are
// known (a sub-graph belongs to one node, so they are the same on every run).
GraphPlan& GraphInterpreter::plan_for(const ir::Graph& g, const Frame* parent) {
    auto it = plans_.find(&g);
    if (it != plans_.end()) return *it->second;
    auto outer_is_fixed = [parent](const std::string& name) { return parent && parent->is_fixed(name); };
    return *plans_.emplace(&g, make_graph_plan(g, outer_is_fixed)).first->second;
}

std::vector<Datum> GraphInterpreter::run_graph(const ir::Graph& g, const std::vector<Datum>& inputs, const Frame* parent) {
    KILN_CHECK(inputs.size() <= g.inputs().size(), kInvalidArgument)
        << "graph '" << g.name << "' takes " << g.inputs().size() << " inputs, got " << inputs.size();
    GraphPlan& plan = plan_for(g, parent);
    const size_t nc = plan.constants.size();
    Frame frame{&g, &plan, parent, std::vector<Datum>(static_cast<size_t>(plan.num_slots) - nc),
                std::vector<char>(static_cast<size_t>(plan.num_slots) - nc, 0)};
    for (size_t i = 0; i < plan.graph_inputs.size(); ++i)
        frame.put(plan.graph_inputs[i], i < inputs.size() ? inputs[i] : Datum::none());
    for (const auto& [slot, v] : plan.outer) {
        const Datum* d = parent ? parent->find(v->name()) : nullptr;
        KILN_CHECK(d != nullptr, kInvalidModel)
            << "graph '" << g.name << "' reads '" << v->name() << "' from an enclosing scope, which does not define it";
        frame.put(slot, *d);
    }
    std::vector<Datum> ins;
    for (size_t i = 0; i < plan.nodes.size(); ++i) {
        const ir::Node& n = *plan.nodes[i];
        ins.clear();
        for (size_t s = 0; s < plan.inputs[i].size(); ++s) {
            const int slot = plan.inputs[i][s];
            if (slot < 0) {
                ins.push_back(Datum::none());
                continue;
            }
            const Datum* d = frame.at(slot);
            KILN_ICHECK(d != nullptr) << n.describe() << " reads '" << n.input(s)->name() << "' before it is computed";
            ins.push_back(*d);
        }
        std::vector<Datum> outs;
        try {
            KILN_CHECK(plan.defs[i] != nullptr, kUnsupported) << "unsupported op '" << n.op() << "' (" << n.describe() << ")";
            if (plan.memo[i]) {
                ++counts_.reused;
                outs = *plan.memo[i];
            } else {
                outs = run_node(n, *plan.defs[i], ins, plan.fixed[i], plan.memoize[i] != 0, frame);
                if (plan.memoize[i]) plan.memo[i] = outs;
            }
        } catch (Error& e) {
            e.add_context("while running " + n.describe() + (g.name.empty() ? "" : " in graph '" + g.name + "'"));
            throw;
        }
        KILN_CHECK(outs.size() == n.num_outputs(), kInternal)
            << n.describe() << ": produced " << outs.size() << " values for " << n.num_outputs() << " outputs";
        for (size_t o = 0; o < outs.size(); ++o) frame.put(plan.outputs[i][o], std::move(outs[o]));
        for (int slot : plan.release[i]) frame.drop(slot);
    }
    std::vector<Datum> result;
    for (size_t o = 0; o < plan.graph_outputs.size(); ++o) {
        const Datum* d = frame.at(plan.graph_outputs[o]);
        KILN_ICHECK(d != nullptr) << "graph output '" << g.outputs()[o]->name() << "' was not computed";
        result.push_back(*d);
    }
    return result;
}

std::vector<Datum> GraphInterpreter::run_node(const ir::Node& n, const op::OpDef& def, const std::vector<Datum>& inputs,
                                              const std::vector<char>& fixed, bool once, const Frame& frame) {
    bool plain = true;
    for (const Datum& d : inputs) plain &= d.is_none() || (d.is_tensor() && d.tensor().dtype() != DType::kString);
    // An omitted optional input is none too; a compute handles that. A present empty optional is
    // indistinguishable here, and only host kernels take optionals.
    if (def.host && (!def.compute || !plain)) {
        ++counts_.host;
        op::HostArgs args{n, inputs, [this, &frame](const ir::Graph& sub, const std::vector<Datum>& ins) {
                              return run_graph(sub, ins, &frame);
                          }};
        return def.host(args);
    }
    KILN_CHECK(def.compute != nullptr, kUnsupported)
        << n.describe() << " has no host kernel and no compute"
        << (def.domain == "ai.kiln.distributed"
                ? ": a collective runs through distributed::CollectiveModel (`kiln run` under mpiexec; "
                  "docs/distributed.md, \"Collectives as graph ops\"), not a Session"
                : "");
    KILN_CHECK(plain, kUnsupported) << n.describe() << " (" << signature_str(n, inputs)
                                    << "): Kiln runs this op on numeric tensors only";
    return eval_compute(n, def, inputs, fixed, once);
}

namespace {

// Whether `now` has the types (and, in value slots, the data) of `then`.
template <typename Input>
bool same_specialization(const std::vector<Input>& then, const std::vector<Datum>& now) {
    if (then.size() != now.size()) return false;
    for (size_t i = 0; i < now.size(); ++i) {
        if (then[i].none != now[i].is_none()) return false;
        if (now[i].is_none()) continue;
        const Tensor& t = now[i].tensor();
        if (then[i].dtype != t.dtype() || then[i].shape != t.shape()) return false;
        if (then[i].data.defined() && std::memcmp(then[i].data.data(), t.data(), t.nbytes()) != 0) return false;
    }
    return true;
}

}  // namespace

GraphInterpreter::SpecializedNode& GraphInterpreter::specialization(const ir::Node& n, const op::OpDef& def,
                                                                    const std::vector<Datum>& inputs,
                                                                    const std::vector<char>& fixed, bool once) {
    NodeCache& nc = node_cache_[&n];
    if (nc.last == nullptr) {
        nc.prefix = n.op() + "|";
        for (const auto& [k, a] : n.attrs()) nc.prefix += k + "=" + ir::attr_str(a) + ";";
        nc.value_slots = std::set<int>(def.value_inputs.begin(), def.value_inputs.end());
        for (size_t i = 0; i < fixed.size(); ++i)
            if (fixed[i]) nc.fixed_slots.insert(static_cast<int>(i));
    } else if (same_specialization(nc.last_inputs, inputs)) {
        return *nc.last;
    }
    // The specialization: op, attributes, input types, and the values of the value inputs (the
    // only inputs a compute may read as data: the rest are graph inputs of the one-node graph).
    std::ostringstream key;
    key << nc.prefix;
    int64_t elements = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].is_none()) {
            key << "|-";
            continue;
        }
        const Tensor& t = inputs[i].tensor();
        elements += t.numel();
        key << "|" << dtype_name(t.dtype()) << shape_str(t.shape());
        if (nc.value_slots.count(static_cast<int>(i)))
            key << "=" << ir::tensor_data_str(t);
        else if (nc.fixed_slots.count(static_cast<int>(i)))
            key << "@" << static_cast<const void*>(n.input(i));  // this value's data, whatever it is
    }
    auto it = specialized_.find(key.str());
    if (it == specialized_.end())
        it = specialized_.emplace(key.str(), specialize(n, def, nc.value_slots, nc.fixed_slots, inputs, elements, once)).first;
    // Remember the types, and a copy of value-input data (not the tensors: they would stay alive).
    nc.last_inputs.assign(inputs.size(), NodeCache::Input{});
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].is_none()) continue;
        const Tensor& t = inputs[i].tensor();
        NodeCache::Input& in = nc.last_inputs[i];
        in.none = false;
        in.dtype = t.dtype();
        in.shape = t.shape();
        if (nc.value_slots.count(static_cast<int>(i))) in.data = t.clone();
    }
    nc.last = it->second.get();
    return *nc.last;
}

std::vector<Datum> GraphInterpreter::eval_compute(const ir::Node& n, const op::OpDef& def,
                                                  const std::vector<Datum>& inputs, const std::vector<char>& fixed,
                                                  bool once) {
    SpecializedNode& sn = specialization(n, def, inputs, fixed, once);
    if (sn.view) {
        ++counts_.views;
        return {Datum(inputs[0].tensor().reshaped(sn.output_types[0].static_shape()))};
    }
    if (sn.executor) {
        ++counts_.compiled;
        std::vector<Tensor> feeds, outs;
        for (size_t s : sn.runtime_slots) feeds.push_back(inputs[s].tensor());
        sn.executor->run(feeds, outs).throw_if_error();
        return std::vector<Datum>(outs.begin(), outs.end());
    }
    if (sn.compile_when_hot && ++sn.interpreted_runs >= kHotRuns) {
        const NodeCache& nc = node_cache_.at(&n);
        sn.executor = compile_node(n, nc.value_slots, nc.fixed_slots, inputs, sn.runtime_slots);
        sn.func = tir::PreparedFunc();
        sn.compile_when_hot = false;
        return eval_compute(n, def, inputs, fixed, once);
    }
    ++counts_.interpreted;
    std::vector<Tensor> buffers;
    for (size_t s : sn.runtime_slots) buffers.push_back(inputs[s].tensor());
    for (const ir::TensorType& t : sn.output_types) buffers.emplace_back(t.dtype, t.static_shape());
    sn.func.run(buffers);
    return std::vector<Datum>(buffers.end() - static_cast<std::ptrdiff_t>(sn.output_types.size()), buffers.end());
}

namespace {

// The one-node graph of `n` on `inputs`: inputs in `constant_slots` become constants (shared
// with the run's tensors, which never change), the others graph inputs, whose slots go to
// `runtime_slots` in order. Returns the node, its types inferred.
ir::Node* one_node_graph(ir::Graph& g, const ir::Node& n, const std::vector<Datum>& inputs,
                         const std::set<int>& constant_slots, std::vector<size_t>& runtime_slots) {
    g.name = n.op();
    std::vector<ir::Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].is_none()) {
            ins.push_back(nullptr);
            continue;
        }
        const Tensor& t = inputs[i].tensor();
        const std::string name = "in" + std::to_string(i);
        if (constant_slots.count(static_cast<int>(i))) {
            ins.push_back(g.add_constant(name, t));
        } else {
            ins.push_back(g.add_input(name, ir::TensorType::of_static(t.dtype(), t.shape())));
            runtime_slots.push_back(i);
        }
    }
    while (!ins.empty() && ins.back() == nullptr) ins.pop_back();
    ir::Node* node = g.add_node(n.op(), ins, n.attrs(), std::vector<ir::TensorType>(n.num_outputs()), {}, n.name());
    node->set_role(n.role());
    op::infer_node(*node);
    for (ir::Value* o : node->outputs()) g.add_output(o);
    return node;
}

}  // namespace

std::unique_ptr<GraphInterpreter::SpecializedNode> GraphInterpreter::specialize(const ir::Node& n, const op::OpDef& def,
                                                                                const std::set<int>& value_slots,
                                                                                const std::set<int>& fixed_slots,
                                                                                const std::vector<Datum>& inputs,
                                                                                int64_t input_elements, bool once) {
    auto sn = std::make_unique<SpecializedNode>();
    ir::Graph g;
    std::vector<size_t> runtime_slots;
    ir::Node* node = one_node_graph(g, n, inputs, value_slots, runtime_slots);
    int64_t output_elements = 0;
    for (ir::Value* o : node->outputs()) {
        sn->output_types.push_back(o->type());
        output_elements += shape_numel(o->type().static_shape());
    }
    const double work = def.flops ? def.flops(*node) : static_cast<double>(output_elements);
    if (op::is_view_op(n.op()) && node->num_outputs() == 1 && node->num_inputs() >= 1 && node->input(0) &&
        node->input(0)->type().dtype == sn->output_types[0].dtype &&
        shape_numel(node->input(0)->type().static_shape()) == output_elements) {
        sn->view = true;  // no copy: the output shares the input's data (values are never written)
        return sn;
    }

    // The tir interpreter for a node that runs once (memoized) or not yet often, unless so large
    // that interpreting it costs more than compiling; compiled once hot (kHotRuns) unless tiny.
    const int64_t max_elements = once ? 16 * kInterpretElements : kInterpretElements;
    if (input_elements <= max_elements && output_elements <= max_elements &&
        work <= (once ? kInterpretOnceWork : kInterpretWork)) {
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
        for (size_t slot : runtime_slots) params.push_back(args.inputs[slot]);
        params.insert(params.end(), outs.begin(), outs.end());
        sn->func = tir::PreparedFunc(tir::simplify(tir::lower(te::create_schedule(outs), params, "interp_" + n.op())));
        sn->runtime_slots = runtime_slots;
        sn->compile_when_hot = !once && work > kTinyWork;
        return sn;
    }
    sn->executor = compile_node(n, value_slots, fixed_slots, inputs, sn->runtime_slots);
    return sn;
}

// Compiled as a model whose fixed inputs (weights) are constants, by the -O3 pipeline: the
// passes pack weights and pick oneDNN as they would for the whole model.
std::unique_ptr<runtime::SequentialExecutor> GraphInterpreter::compile_node(const ir::Node& n, const std::set<int>& value_slots,
                                                                           const std::set<int>& fixed_slots,
                                                                           const std::vector<Datum>& inputs,
                                                                           std::vector<size_t>& runtime_slots) {
    ir::Graph g;
    std::set<int> baked = value_slots;
    baked.insert(fixed_slots.begin(), fixed_slots.end());
    runtime_slots.clear();
    one_node_graph(g, n, inputs, baked, runtime_slots);
    CompileOptions opts;
    opts.compile_jobs = 1;
    CompiledModel m = compile(g, opts);
    ++counts_.compiles;
    return std::make_unique<runtime::SequentialExecutor>(m.executable, pool_, alloc_);
}

}  // namespace kiln::compiler
