// assign_int8_layouts: which 8-bit activations stay channels-last (NHWC) between int8 kernels.
//
// oneDNN's int8 convolutions read and write NHWC; Kiln's tensors are NCHW, so a dnnl_qconv
// step reorders its input to NHWC and its output back (runtime/dnnl_int8_kernels.cc), as costly
// as a 1x1 conv itself. A value written by a dnnl_qconv, kiln_qmaxpool or kiln_qadd step and
// read only by dnnl_qconv and kiln_qmaxpool steps (as x) and kiln_qadd steps (elementwise: fine
// in any layout as long as its a, b and y share one) is kept in NHWC: the steps' parameters say
// so (x_layout / y_layout = nhwc). Graph outputs, values read by any other kernel (a generated
// pool, a view) and 8-bit values of a kiln_qadd with a float output stay NCHW. A dnnl_qconv's
// fused residual (sum) is in its y's layout: both NHWC or neither. The buffers are the same size: only their element
// order changes, which only these kernels see.
#pragma once

#include <vector>

#include "compiler/lower_group.h"

namespace kiln::compiler {

/// `units[i]` lowered to `kernels[i]` (nullptr: a view or a step of no kernel). Rewrites the
/// extern parameters of dnnl_qconv and kiln_qmaxpool steps whose input or output stays NHWC.
void assign_int8_layouts(const ir::Graph& g, const std::vector<const KernelUnit*>& units,
                         const std::vector<LoweredKernel*>& kernels);

}  // namespace kiln::compiler
