// InterpretedCallee: a VM callee that runs a graph in the graph interpreter (the fallback of
// lower_control_flow for a branch or loop that does not compile). Its graph's inputs are the
// call's inputs in order; its outputs become the call's outputs (fresh tensors).
#pragma once

#include <memory>
#include <string>

#include "compiler/graph_interpreter.h"
#include "ir/graph.h"
#include "runtime/vm/program.h"

namespace kiln::compiler {

class InterpretedCallee final : public runtime::vm::Callee {
public:
    InterpretedCallee(std::shared_ptr<const ir::Graph> g, std::string why, runtime::ThreadPool* pool,
                      runtime::Allocator* alloc);
    Status call(const Tensor* const* ins, size_t num_ins, Tensor* const* outs, const char* reusable,
                size_t num_outs) override;
    std::string describe() const override;

private:
    std::shared_ptr<const ir::Graph> graph_;
    std::string why_;
    GraphInterpreter interp_;
};

/// A graph of one node `op` (attributes, sub-graphs shared) reading `node_inputs` by name ("":
/// omitted), each a graph input of `inputs` or a constant of `constants` (names in the node's
/// sub-graphs resolve to those too), with `num_outputs` graph outputs.
std::shared_ptr<ir::Graph> one_node_graph_of(const std::string& op, const ir::AttrMap& attrs,
                                             const std::vector<std::string>& node_inputs, size_t num_outputs,
                                             const std::vector<std::pair<std::string, ir::TensorType>>& inputs,
                                             const std::vector<std::pair<std::string, Tensor>>& constants,
                                             const std::string& node_name);

}  // namespace kiln::compiler
