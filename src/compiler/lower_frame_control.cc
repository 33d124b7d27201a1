#include "compiler/lower_frame_control.h"

#include <string>
#include <utility>

#include "op/registry.h"
#include "runtime/extern_kernel.h"
#include "support/error.h"

namespace kiln::compiler {

bool is_frame_control_unit(const KernelUnit& unit) {
    if (unit.nodes.size() != 1) return false;
    const op::OpDef* def = op::OpRegistry::global().find(unit.nodes[0]->op());
    return def && def->frame_control;
}

LoweredKernel lower_frame_control(const KernelUnit& unit) {
    const ir::Node& n = *unit.nodes[0];
    std::vector<std::pair<std::string, std::string>> params;
    for (const auto& [key, value] : n.attrs()) {
        if (const auto* i = std::get_if<int64_t>(&value))
            params.emplace_back(key, std::to_string(*i));
        else if (const auto* s = std::get_if<std::string>(&value))
            params.emplace_back(key, *s);
    }
    LoweredKernel k;
    k.description = n.op();
    k.node_name = n.name().empty() ? n.op() : n.name();
    k.control = n.op();
    k.control_params = runtime::ExternParams::format(params);
    k.num_inputs = static_cast<int>(n.num_inputs());
    k.flops = 0;
    return k;
}

std::vector<int> frame_control_args(const ir::Node& n, const std::unordered_map<const ir::Value*, int>& buffer_of) {
    std::vector<int> args;
    for (const ir::Value* v : n.inputs()) {
        KILN_CHECK(v != nullptr, kInvalidModel) << n.describe() << ": a control-flow node has no optional inputs";
        args.push_back(buffer_of.at(v));
    }
    for (const ir::Value* v : n.outputs()) args.push_back(buffer_of.at(v));
    return args;
}

}  // namespace kiln::compiler
