// The parameters of an extern kernel that follow its arguments' shapes (issue 23,
// docs/dynamic_shapes.md): what a run at new dims overrides in the step's parameter text
// before the kernel for those shapes is made (runtime/extern_at_shapes.h).
//
// dnnl_conv (convolution and deconvolution, plain NC... or blocked NCHW{c} activations): `src`
// from the input's batch and spatial dims (the channels are static: the template's), `dst` from
// the window (ONNX: out = floor((in + pads - ((k - 1) d + 1)) / s) + 1; a deconvolution's
// out = (in - 1) s + (k - 1) d + 1 - pads), checked against the output's shape; `taps` back to
// the whole kernel (the template's pads are the window's own: a compile that drops taps at one
// shape cannot drop them for all).
//
// kiln_rnn (RNN, GRU, LSTM: runtime/rnn_kernel.h): `seq` and `batch` from X's shape (the hidden
// and input sizes are static), checked against Y's.
//
// kiln_softmax (runtime/softmax_kernel.h): `len` is Y's last dim, `rows` the product of the
// others (Y's shape is the Softmax's own; X's buffer may be a view's source); X must hold as
// many elements.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/extern_kernel.h"
#include "support/tensor.h"

namespace kiln::runtime {

using ParamPairs = std::vector<std::pair<std::string, std::string>>;

/// The pairs of kernel `name`'s parameters `p` at argument shapes `shapes` (Kiln's buffer
/// shapes, inputs then outputs); nullopt when the step computes nothing at these shapes (an
/// empty output). A shape the parameters cannot take (an input smaller than the window, an
/// output of another size than the window gives) is a kInvalidArgument error naming the dim,
/// expected vs got; a kernel without a shape rule is kUnsupported.
std::optional<ParamPairs> extern_shape_pairs(const std::string& name, const ExternParams& p,
                                             const std::vector<Shape>& shapes);

/// Whether extern kernel `name` has a shape rule (can run on symbolic shapes).
bool extern_takes_shapes(const std::string& name);

}  // namespace kiln::runtime
