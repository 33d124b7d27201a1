// VmModel: a session's model run by the VM (runtime/vm) for control flow: one lowered program
// (compiler/lower_control_flow.h) and its VirtualMachine per set of input shapes seen (and values
// of the shape-deciding inputs), lowered at the first run that brings them. One run at a time
// (the caller holds a lock).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/lower_control_flow.h"
#include "runtime/vm/vm.h"

namespace kiln::compiler {

class VmModel {
public:
    VmModel(std::shared_ptr<const ir::Graph> g, LowerContext ctx);

    /// The program for these input shapes, lowered now if new. Throws kiln::Error when the model
    /// cannot be lowered at these shapes (the caller then runs it in the graph interpreter).
    runtime::vm::VirtualMachine& machine(const std::vector<Tensor>& inputs);
    /// Runs `vm` (from machine()); a failed instruction throws, naming its node.
    static std::vector<Tensor> run(runtime::vm::VirtualMachine& vm, const std::vector<Tensor>& inputs);

    /// Figures of the last lowering.
    const ControlFlowLowering& last() const { return last_; }
    /// The program of the last lowering as text.
    std::string program_text() const;

private:
    std::shared_ptr<const ir::Graph> graph_;
    LowerContext ctx_;
    std::set<std::string> frozen_;  // shape_deciding_inputs(graph_)
    std::map<std::string, std::unique_ptr<runtime::vm::VirtualMachine>> machines_;  // by input shapes
    ControlFlowLowering last_;
};

}  // namespace kiln::compiler
