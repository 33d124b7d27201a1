// fuse_elementwise_loops: two adjacent loop nests of the same shape, each one store, run as one
// nest when the second reads what the first writes only at the element the first writes there.
//
// A fused kernel with two elementwise outputs, one read by the other (SGD with momentum:
// v' = mu*v + g, p' = p - lr*v'), lowers to one nest per output: v' goes out to memory and
// comes back for p'. Fused, each element of v' feeds p' from a register, and each thread
// makes one pass over its rows instead of two (one parallel task instead of two).
//
// Legal when: the nests have equal depth, extents and loop kinds and their innermost bodies are
// single stores to different buffers; after renaming the second nest's loop variables to the
// first's, every load in either store reads its own nest's element (the index the store
// writes) or a one-element buffer (a scalar), and the first store does not read the second's
// buffer. Then no element is read in the fused order before it is written in the original
// one, also when an output shares an input's memory (params_may_alias).
#pragma once

#include "tir/stmt.h"

namespace kiln::tir {

PrimFunc fuse_elementwise_loops(PrimFunc f);

}  // namespace kiln::tir
