// What a node costs, from the op registry's row: its floating-point operations (OpDef::flops;
// one per output element when the row has none) and the bytes it reads and writes (its inputs,
// constants included, and outputs). Cost models turn these into seconds with their machine's
// rates: the pipeline split's roofline (distributed/stage_cost.h), device placement's per-device
// rooflines (pass/place_devices.h).
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kiln::op {

/// Elements of a tensor type (unknown dims count as 1) and its bytes.
int64_t type_elements(const ir::TensorType& t);
int64_t type_bytes(const ir::TensorType& t);

struct NodeWork {
    double flops = 0;
    double bytes = 0;
};

/// kInvalidModel for an op the registry lacks.
NodeWork node_work(const ir::Node& n);

}  // namespace kiln::op
