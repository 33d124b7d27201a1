// Which Softmax nodes run as the runtime's row kernel (runtime/softmax_kernel.h): a unit of one
// float32 Softmax over the last axis with rows of at least 16 (a vector), static or symbolic. The
// generated kernel streams the tensor once per stage; the row kernel reads it once (attention
// scores over long sequences ran 3.3x ONNX Runtime's time).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_softmax kernel computing the unit, or nullopt. `inputs` and `outputs` are the unit's
/// arguments in order (the kernel's args are inputs then outputs). `symbolic`: a unit of a
/// symbolic compile (some dim symbolic; a symbolic last dim of any length), whose rows the shape
/// rule sets per run (runtime/extern_shape_params.h).
std::optional<ExternChoice> match_row_softmax(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                              const std::vector<ir::Value*>& outputs, bool symbolic = false);

}  // namespace kiln::topi
