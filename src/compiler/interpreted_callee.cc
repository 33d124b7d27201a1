// InterpretedCallee (see interpreted_callee.h).
#include "compiler/interpreted_callee.h"

#include <map>

#include "op/registry.h"

namespace kiln::compiler {

InterpretedCallee::InterpretedCallee(std::shared_ptr<const ir::Graph> g, std::string why, runtime::ThreadPool* pool,
                                     runtime::Allocator* alloc)
    : graph_(g), why_(std::move(why)), interp_(std::move(g), pool, alloc) {}

std::string InterpretedCallee::describe() const { return "graph interpreter '" + graph_->name + "' (" + why_ + ")"; }

Status InterpretedCallee::call(const Tensor* const* ins, size_t num_ins, Tensor* const* outs, const char*,
                               size_t num_outs) {
    try {
        std::vector<Datum> args;
        for (size_t i = 0; i < num_ins; ++i) args.emplace_back(*ins[i]);
        std::vector<Datum> got = interp_.run(args);
        KILN_CHECK(got.size() == num_outs, kInternal) << graph_->name << " gave " << got.size() << " outputs, expected " << num_outs;
        for (size_t k = 0; k < num_outs; ++k) *outs[k] = got[k].tensor("output " + std::to_string(k) + " of " + graph_->name);
    } catch (const Error& e) {
        return Status::from(e);
    }
    return Status::ok_status();
}

std::shared_ptr<ir::Graph> one_node_graph_of(const std::string& op, const ir::AttrMap& attrs,
                                             const std::vector<std::string>& node_inputs, size_t num_outputs,
                                             const std::vector<std::pair<std::string, ir::TensorType>>& inputs,
                                             const std::vector<std::pair<std::string, Tensor>>& constants,
                                             const std::string& node_name) {
    auto g = std::make_shared<ir::Graph>();
    g->name = node_name;
    std::map<std::string, ir::Value*> by_name;
    for (const auto& [name, type] : inputs) by_name[name] = g->add_input(name, type);
    for (const auto& [name, t] : constants) by_name[name] = g->add_constant(name, t);
    std::vector<ir::Value*> ins;
    for (const std::string& name : node_inputs) {
        if (name.empty()) {
            ins.push_back(nullptr);
            continue;
        }
        auto it = by_name.find(name);
        KILN_CHECK(it != by_name.end(), kInternal) << "bug in Kiln: " << node_name << " reads '" << name << "', not bound";
        ins.push_back(it->second);
    }
    std::vector<std::string> out_names;
    for (size_t k = 0; k < num_outputs; ++k) out_names.push_back(node_name + ":out" + std::to_string(k));
    ir::Node* n = g->add_node(op, ins, attrs, std::vector<ir::TensorType>(num_outputs), out_names, node_name);
    op::infer_node(*n);
    for (ir::Value* o : n->outputs()) g->add_output(o);
    return g;
}

}  // namespace kiln::compiler
