// VmModel: a session's model run by the VM (runtime/vm) for control flow: one lowered program
// (compiler/lower_control_flow.h) and its VirtualMachine per set of input shapes seen (and values
// of the shape-deciding inputs), lowered at the first run that brings them. One run at a time
// (the caller holds a lock).
#pragma once

#include <deque>
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
    /// Holds at most `max_programs` programs (SessionOptions::max_specializations; 0: no bound):
    /// a new one beyond drops the oldest.
    VmModel(std::shared_ptr<const ir::Graph> g, LowerContext ctx, size_t max_programs = 0);

    /// The program for these input shapes, lowered now if new. Throws kiln::Error when the model
    /// cannot be lowered at these shapes (the caller then runs it in the graph interpreter).
    runtime::vm::VirtualMachine& machine(const std::vector<Tensor>& inputs);
    /// Runs `vm` (from machine()); a failed instruction throws, naming its node; `terminate`
    /// (RunOptions::terminate) stops a running loop (kCancelled).
    static std::vector<Tensor> run(runtime::vm::VirtualMachine& vm, const std::vector<Tensor>& inputs,
                                   const std::atomic<bool>* terminate = nullptr);

    /// Figures of the last lowering.
    const ControlFlowLowering& last() const { return last_; }
    /// The program of the last lowering as text.
    std::string program_text() const;

private:
    std::shared_ptr<const ir::Graph> graph_;
    LowerContext ctx_;
    std::set<std::string> frozen_;  // shape_deciding_inputs(graph_)
    std::map<std::string, std::unique_ptr<runtime::vm::VirtualMachine>> machines_;  // by input shapes
    std::deque<std::string> order_;  // keys of machines_, oldest first
    size_t max_programs_;
    ControlFlowLowering last_;
};

}  // namespace kiln::compiler
