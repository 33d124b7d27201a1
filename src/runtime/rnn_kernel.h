// The fused recurrent kernel (extern kernel "kiln_rnn"): ONNX RNN / GRU / LSTM as packed GEMMs
// around fused gate passes, instead of the op's time-unrolled TE (op/defs/recurrent.cc, which
// states the semantics this kernel reproduces).
//
//   1. The input projection of every time step and direction is one GEMM (oneDNN matmul):
//      xw[T*batch, D*G*H] = X[T*batch, I] x W^T, split by rows across the intra-op threads.
//   2. Per time step and direction: one recurrent GEMM [batch, H] x [H, G*H] (GRU without
//      linear_before_reset: two, the second on r * h), its weights packed once at load into
//      oneDNN's layout and kept (in cache across steps), then one pass over the gates
//      (rnn_gates.h: activations, clip, peepholes, the state update) that writes the new state
//      and Y in place. With sequence_lens a finished batch row keeps its state; Y is 0 there.
//      At batch 1 with constant R (and AVX2) the product is rnn::PackedGemv (rnn_gemv.h) instead.
//   3. Y_h / Y_c from the final state (0 for a row of length 0, as ONNX Runtime gives).
// Threads: the two directions of a bidirectional node run side by side; where one direction's
// recurrent GEMM is large enough, its hidden units are split into parts (one per thread, each
// with the weight rows of its units and every gate), joined once per step by rnn::StepLoop
// (rnn_steps.h: one pool entry for all the steps).
//
// Parameters (topi/rnn_match.cc writes them): cell=rnn|gru|lstm, dirs, reverse=0,1 (per
// direction), hidden, input, seq (T), batch, layout=0|1, acts=NAME:ALPHA:BETA,... (per direction: f (g (h))),
// clip (optional), input_forget, lbr, and the argument indices x w r b lens h0 c0 p (inputs) y
// yh yc (outputs), -1 where absent. Nothing is compiled per sequence length: T only sizes the
// loop and the workspace. W, R and B may be constants or per-call inputs.
// Built only with oneDNN (KILN_HAVE_DNNL).
#pragma once

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
std::unique_ptr<ExternKernel> make_rnn_kernel(const ExternParams& params, const std::vector<ExternArg>& args);
#endif

}  // namespace kiln::runtime
