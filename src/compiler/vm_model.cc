// VmModel (see vm_model.h).
#include "compiler/vm_model.h"

namespace kiln::compiler {

VmModel::VmModel(std::shared_ptr<const ir::Graph> g, LowerContext ctx, size_t max_programs)
    : graph_(std::move(g)), ctx_(std::move(ctx)), frozen_(shape_deciding_inputs(*graph_)), max_programs_(max_programs) {}

runtime::vm::VirtualMachine& VmModel::machine(const std::vector<Tensor>& inputs) {
    std::string key;
    std::vector<Shape> shapes;
    std::map<std::string, Tensor> frozen;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        key += shape_str(t.shape()) + ";";
        shapes.push_back(t.shape());
        const std::string& name = graph_->inputs().at(i)->name();
        if (!frozen_.count(name)) continue;
        key += "=" + std::string(static_cast<const char*>(t.data()), t.nbytes()) + ";";  // its bytes
        frozen[name] = t.clone();
    }
    auto it = machines_.find(key);
    if (it != machines_.end()) return *it->second;
    last_ = lower_control_flow(*graph_, shapes, ctx_, frozen);
    auto vm = std::make_unique<runtime::vm::VirtualMachine>(last_.program);
    if (max_programs_ > 0 && machines_.size() >= max_programs_) {
        machines_.erase(order_.front());
        order_.pop_front();
    }
    order_.push_back(key);
    return *machines_.emplace(key, std::move(vm)).first->second;
}

std::vector<Tensor> VmModel::run(runtime::vm::VirtualMachine& vm, const std::vector<Tensor>& inputs,
                                 const std::atomic<bool>* terminate) {
    std::vector<Tensor> outs;
    vm.run(inputs, outs, terminate).throw_if_error();
    return outs;
}

std::string VmModel::program_text() const {
    return last_.program ? runtime::vm::program_text(*last_.program) : "no program lowered yet\n";
}

}  // namespace kiln::compiler
