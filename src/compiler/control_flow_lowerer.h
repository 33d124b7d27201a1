// ControlFlowLowerer: the state of one lower_control_flow() (compiler/lower_control_flow.h).
// control_flow_lowerer.cc lowers functions and segments; lower_control_flow_nodes.cc lowers
// If, Loop and Scan nodes.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/lower_control_flow.h"

namespace kiln::compiler {

namespace vm = runtime::vm;

/// A value a body reads from an enclosing scope: a register of the enclosing function, or a
/// constant (baked into the body's segments).
struct Captured {
    std::string name;
    int reg = -1;  // in the enclosing function; -1 for a constant
    vm::RegType type;
    Tensor constant;
};

class ControlFlowLowerer {
public:
    explicit ControlFlowLowerer(const LowerContext& ctx);
    ControlFlowLowering finish(int entry);

    /// Lowers `g` as a function: params are `param_types` (g's inputs) then the non-constant
    /// `captured`. Returns the function's index.
    /// `frozen`: inputs of g (by name) whose values are known: constants of the function.
    int lower_function(const ir::Graph& g, const std::string& name, const std::vector<vm::RegType>& param_types,
                       const std::vector<Captured>& captured, const std::map<std::string, Tensor>* frozen = nullptr);
    const vm::Function& function(int i) const { return program_->functions[static_cast<size_t>(i)]; }

private:
    struct Scope {
        const ir::Graph* g = nullptr;
        int fn = -1;
        std::unordered_map<const ir::Value*, int> reg;
        std::map<std::string, int> outer;       // captured name -> param register
        std::map<std::string, Tensor> consts;   // captured constants by name
        std::set<std::string> captured_later;   // names the graph's control-flow nodes capture
        std::unordered_map<const ir::Value*, Tensor> folded;  // segment outputs compile() folded
    };
    vm::Function& fn(const Scope& s) { return program_->functions[static_cast<size_t>(s.fn)]; }
    int new_reg(Scope& s, vm::RegType t);
    int reg_of(Scope& s, const ir::Value* v);
    const Tensor* constant_of(const Scope& s, const ir::Value* v) const;
    /// Emits the pending nodes as one segment: compiled, else interpreted. Clears `pending`.
    void flush_segment(Scope& s, std::vector<const ir::Node*>& pending);
    std::vector<const ir::Value*> segment_outputs(const Scope& s, const std::vector<const ir::Node*>& nodes) const;
    void compile_segment(Scope& s, const std::vector<const ir::Node*>& nodes);
    void interpret_segment(Scope& s, const std::vector<const ir::Node*>& nodes, const std::string& why);
    void lower_node(Scope& s, const ir::Node& n);
    std::vector<Captured> captured_of(Scope& s, const ir::Node& n);
    void lower_if(Scope& s, const ir::Node& n);
    void lower_loop(Scope& s, const ir::Node& n);
    void lower_scan(Scope& s, const ir::Node& n);
    /// Lowers a Loop or Scan body; when it does not lower, emits `n` whole in the interpreter
    /// (interpret_node) and returns nullopt.
    std::optional<int> lower_body(Scope& s, const ir::Node& n, const ir::Graph& body,
                                  const std::vector<vm::RegType>& params, const std::vector<Captured>& cap);
    /// A function running `branch` in the graph interpreter (an If branch that does not compile).
    int interpreted_branch(const ir::GraphAttr& branch, const std::string& name, const std::vector<Captured>& cap,
                           const std::string& why);
    /// Emits a kCall running `n` whole in the graph interpreter.
    void interpret_node(Scope& s, const ir::Node& n, const std::vector<Captured>& cap, const std::string& why);
    int add_callee(std::shared_ptr<vm::Callee> c);

    LowerContext ctx_;
    std::shared_ptr<vm::Program> program_;
    // Per function: the results known at lowering time (folded constants), by result index.
    std::map<int, std::map<size_t, Tensor>> constant_results_;
    ControlFlowLowering stats_;
};

/// The register type of a static ir type, with -1 dims where it is not static.
vm::RegType reg_type_of(const ir::TensorType& t);
/// The ir type of a register type (a -1 dim becomes a symbolic "?").
ir::TensorType ir_type_of(const vm::RegType& t);
bool is_known(const vm::RegType& t);

}  // namespace kiln::compiler
