#include "op/node_cost.h"

#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

int64_t type_elements(const ir::TensorType& t) {
    int64_t n = 1;
    for (const ir::Dim& d : t.shape) n *= d.is_static() ? d.value : 1;
    return n;
}

int64_t type_bytes(const ir::TensorType& t) {
    return type_elements(t) * static_cast<int64_t>(dtype_size(t.dtype));
}

NodeWork node_work(const ir::Node& n) {
    const OpDef* def = OpRegistry::global().find(n.op());
    KILN_CHECK(def != nullptr, kInvalidModel) << n.describe() << ": unknown op, no cost estimate";
    NodeWork w;
    for (const ir::Value* v : n.inputs())
        if (v) w.bytes += static_cast<double>(type_bytes(v->type()));
    double out_elements = 0;
    for (const ir::Value* v : n.outputs()) {
        w.bytes += static_cast<double>(type_bytes(v->type()));
        out_elements += static_cast<double>(type_elements(v->type()));
    }
    w.flops = def->flops ? def->flops(n) : out_elements;
    return w;
}

}  // namespace kiln::op
