// Which nodes oneDNN's convolution backward primitives compute: a unit of one KilnConvGradData
// (convolution_backward_data) or KilnConvGradWeight (convolution_backward_weights) node
// (op/defs/conv_grad.cc) with float32 static shapes, 1 to 3 spatial dims; the parameters the
// runtime's dnnl_conv_bwd kernel reads (runtime/dnnl_conv_backward.h documents them).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The dnnl_conv_bwd kernel computing the unit, or nullopt. `inputs` and `outputs` are the
/// unit's arguments in order (the kernel's args are inputs then outputs).
std::optional<ExternChoice> match_conv_backward(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                                const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
