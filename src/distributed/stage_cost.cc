#include "distributed/stage_cost.h"

#include <algorithm>

#include "op/registry.h"
#include "support/error.h"

namespace kiln::distributed {

int64_t type_elements(const ir::TensorType& t) {
    int64_t n = 1;
    for (const ir::Dim& d : t.shape) n *= d.is_static() ? d.value : 1;
    return n;
}

int64_t type_bytes(const ir::TensorType& t) {
    return type_elements(t) * static_cast<int64_t>(dtype_size(t.dtype));
}

NodeCost node_cost(const ir::Node& n) {
    const op::OpDef* def = op::OpRegistry::global().find(n.op());
    KILN_CHECK(def != nullptr, kInvalidModel) << n.describe() << ": unknown op, no cost estimate";
    NodeCost c;
    for (const ir::Value* v : n.inputs())
        if (v) c.bytes += static_cast<double>(type_bytes(v->type()));
    double out_elements = 0;
    for (const ir::Value* v : n.outputs()) {
        c.bytes += static_cast<double>(type_bytes(v->type()));
        out_elements += static_cast<double>(type_elements(v->type()));
    }
    c.flops = def->flops ? def->flops(n) : out_elements;
    c.seconds = std::max(c.flops / kNominalFlops, c.bytes / kNominalBytes);
    return c;
}

}  // namespace kiln::distributed
