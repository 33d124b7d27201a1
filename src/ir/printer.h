// Text form of the IR (one node per line), parseable by ir/parser.h:
//
//   graph main(%x: f32[1,3,8,8], %w: f32[4,3,3,3]) {
//     const %b: f32[4] = [0.1, 0.2, 0.3, 0.4]
//     %y = Conv(%x, %w, %b) {pads=[1,1,1,1], strides=[1,1]} : f32[1,4,8,8]
//     %r = Relu(%y) : f32[1,4,8,8]
//     return %r
//   }
//
// Multiple outputs: `%a, %b = Op(...) : f32[2], f32[3]`. An omitted optional input prints as `_`.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

struct PrintOptions {
    /// Constants larger than this many elements print as `= <elided N values>` (not parseable).
    /// Use -1 to always print full data (round-trip).
    int64_t max_constant_elements = -1;
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});

}  // namespace kiln::ir
