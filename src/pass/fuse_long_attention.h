// fuse_long_attention: scaled dot-product attention over long key sequences, written out as
// exporters write it,
//   MatMul(Q [B, H, S, D], Kt [B, H, D, T]) [-> Div or Mul by a scalar constant]
//   -> Softmax(last axis) -> MatMul(., V [B, H, T, Dv])
// with every intermediate used once (and no graph output), float32, static shapes and
// T >= kMinKeys (512), becomes one KilnBlockedAttention(Q, Kt, V) {scale} (op/defs/
// blocked_attention.cc), which the runtime computes a block of query rows at a time with the
// scores in cache (runtime/attention_kernel.h). Shorter sequences keep their kernels: their
// scores fit the caches already (BERT's 128, ViT's 197).
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool fuse_long_attention(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
