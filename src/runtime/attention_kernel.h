// kiln_attention: KilnBlockedAttention (op/defs/blocked_attention.cc), softmax(scale * Q Kt) V,
// a block of query rows at a time: per (batch x head, block of kRows query rows) one part
// computes the block's scores (oneDNN's sgemm, scale as its alpha), their softmax in place
// (runtime/softmax_kernel.h softmax_rows: the Softmax's semantics) and the block's output
// (sgemm with V). The scores of a block (kRows x T floats, 192 KB at T = 1500) stay in L2: the
// unfused product wrote and read [S, T] per head through memory three times (Whisper's
// encoder over 1500 frames: scores of 54 MB per layer).
//
// Parameters: q, kt, v, y (argument indices), bh (batch x heads), s, t, d, dv, scale.
// Compiled only with oneDNN (KILN_HAVE_DNNL).
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
std::unique_ptr<ExternKernel> make_attention_kernel(const ExternParams& params, const std::vector<ExternArg>& args);
#endif

}  // namespace kiln::runtime
