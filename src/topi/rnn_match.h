// Which RNN / GRU / LSTM nodes the runtime's fused recurrent kernel computes (runtime/rnn_kernel.h
// documents the kernel and its parameters): a unit of one such node with float32 data, static
// shapes and an int32 sequence_lens. Every direction, activation, clip, peephole, input_forget,
// linear_before_reset and layout is covered; other dtypes keep the op's generated (unrolled)
// kernel. W, R and B may be constants (packed once) or inputs of the unit.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_rnn kernel computing the unit, or nullopt. `inputs` and `outputs` are the unit's
/// arguments in order (the kernel's args are inputs then outputs).
std::optional<ExternChoice> match_rnn(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                      const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
