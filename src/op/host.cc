#include "op/host.h"

#include "support/error.h"

namespace kiln::op {

const Tensor& HostArgs::tensor(size_t i) const {
    KILN_CHECK(i < inputs.size(), kInvalidArgument) << node.describe() << ": input " << i << " is missing";
    return inputs[i].tensor(node.describe() + " input " + std::to_string(i));
}

const std::vector<Tensor>& HostArgs::sequence(size_t i) const {
    KILN_CHECK(i < inputs.size(), kInvalidArgument) << node.describe() << ": input " << i << " is missing";
    return inputs[i].items(node.describe() + " input " + std::to_string(i));
}

const ir::Graph& HostArgs::graph_attr(const std::string& name) const {
    auto it = node.attrs().find(name);
    KILN_CHECK(it != node.attrs().end() && std::holds_alternative<ir::GraphAttr>(it->second), kInvalidModel)
        << node.describe() << ": missing graph attribute '" << name << "'";
    const ir::GraphAttr& g = std::get<ir::GraphAttr>(it->second);
    KILN_ICHECK(g != nullptr) << "null graph attribute '" << name << "'";
    return *g;
}

}  // namespace kiln::op
