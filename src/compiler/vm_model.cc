// VmModel (see vm_model.h).
#include "compiler/vm_model.h"

namespace kiln::compiler {

VmModel::VmModel(std::shared_ptr<const ir::Graph> g, LowerContext ctx) : graph_(std::move(g)), ctx_(std::move(ctx)) {}

runtime::vm::VirtualMachine& VmModel::machine(const std::vector<Tensor>& inputs) {
    std::string key;
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) {
        key += shape_str(t.shape()) + ";";
        shapes.push_back(t.shape());
    }
    auto it = machines_.find(key);
    if (it != machines_.end()) return *it->second;
    last_ = lower_control_flow(*graph_, shapes, ctx_);
    auto vm = std::make_unique<runtime::vm::VirtualMachine>(last_.program);
    return *machines_.emplace(key, std::move(vm)).first->second;
}

std::vector<Tensor> VmModel::run(runtime::vm::VirtualMachine& vm, const std::vector<Tensor>& inputs) {
    std::vector<Tensor> outs;
    vm.run(inputs, outs).throw_if_error();
    return outs;
}

std::string VmModel::program_text() const {
    return last_.program ? runtime::vm::program_text(*last_.program) : "no program lowered yet\n";
}

}  // namespace kiln::compiler
