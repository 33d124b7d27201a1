// Which kernels oneDNN computes: matches a fused kernel unit (its nodes in order, the values it
// reads from outside and the values it writes) to a oneDNN primitive with post-ops, and gives the
// parameters the runtime's extern kernel reads (runtime/dnnl_kernels.cc).
//
// Matched: an anchor first — KilnConv2dNCHWc (blocked NCHW{c}), KilnDepthwiseConv2dNCHWc, an
// ONNX Conv on NC + 1 to 3 spatial dims (any group count; taps of a dilated window that only
// read padding left out), an ONNX ConvTranspose (oneDNN's deconvolution, 1 to 3 spatial dims,
// with its bias and no epilogue), MatMul (a 2-D B shared across A's batch, or equal batch
// dims), Gemm (alpha = 1, any transposes, C broadcast along rows) — then a chain of elementwise
// nodes each consuming the previous result once: Relu, LeakyRelu, Clip, Sigmoid, Tanh, Exp,
// Gelu, HardSigmoid, HardSwish, the erf GELU written out (x * 0.5 * (1 + erf(x / sqrt 2))),
// SiLU and hard-swish written out (x * Sigmoid(x), x * HardSigmoid(x)), Add/Sub/Mul/Div by a scalar
// constant, a MatMul's bias Add of an [N], and Add/Mul of a tensor of the result's type (a
// residual). Weights and biases are constants (packed once) or unit inputs read on every call
// (a training step's parameters, computed gradients); the blocked conv anchors need constant
// weights. Only float32 and static shapes; anything else is left to the generated kernel
// (nullopt). RNN / GRU / LSTM nodes go to the fused recurrent kernel (topi/rnn_match.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::topi {

struct ExternChoice {
    std::string name;    // runtime extern kernel: "dnnl_conv", "dnnl_matmul" or "kiln_rnn"
    /// Its parameters, key = value (the compiler writes them as runtime::ExternParams text).
    std::vector<std::pair<std::string, std::string>> params;
    /// The input the output may share a buffer with (the residual that oneDNN's sum post-op adds
    /// in place; the kernel copies it into the output otherwise), or -1.
    int inplace_input = -1;
};

/// The oneDNN kernel computing the unit, or nullopt. `inputs` and `outputs` are the unit's
/// arguments in order (the kernel's args are inputs then outputs).
std::optional<ExternChoice> match_dnnl(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs);

/// The elementwise chain nodes[first..] after an anchor writing `anchor_out`, as the "post"
/// parameter's items and a bias [N] argument (-1: none); nullopt where oneDNN cannot express it.
/// For the int8 matchers (topi/dnnl_int8_match.h).
struct DnnlEpilogue {
    std::vector<std::string> posts;
    int bias_arg = -1;
    const ir::Value* result = nullptr;
};
std::optional<DnnlEpilogue> match_dnnl_epilogue(const std::vector<ir::Node*>& nodes, size_t first,
                                                const ir::Value* anchor_out, const std::vector<ir::Value*>& inputs);

}  // namespace kiln::topi
