// Which loads of a vectorized loop the C emitter reads into a small array ahead of the loop.
//
// A load whose index moves with the vector index through a floordiv or floormod (the
// interleave of a pixel shuffle or of a ConvTranspose's polyphase output, the gather of a
// transpose out of a blocked layout) is beyond GCC 12's data-reference analysis: the whole
// loop stays scalar, its math too. DCGAN's last step, a polyphase deconv's interleave + Slice
// + Tanh over [1, 3, 64, 64], ran its tanh one lane at a time: 139 us at two threads, 4% of its
// roofline. Read into `float g[n]` by a loop of its own first, the gather stays scalar but the
// math loop reads `g[i]` with unit stride and vectorizes (86 -> 14 us for that loop nest).
//
// Only where it pays and is safe: the loop's body is stores only (no nested loop, If or
// allocation), every store moves by one element per step, the body does math a vector does
// many times faster than a scalar loop (a transcendental, a division or a power), and the
// staged buffer is not written by the loop. A pure copy keeps its loop as it is: staging
// would move the same scalar loads into one more pass.
#pragma once

#include <vector>

#include "te/expr.h"
#include "tir/stmt.h"

namespace kiln::codegen {

/// The distinct loads (BufferLoad expressions, structurally distinct) of vectorized loop `f` to
/// read into an array ahead of it; empty where the loop should be emitted as it is.
std::vector<te::Expr> gathers_to_stage(const tir::ForNode& f);

}  // namespace kiln::codegen
