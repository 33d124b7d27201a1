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
//
// Details (parser.h reads exactly this; whitespace and newlines are free, `//` starts a comment):
//  - Value names print `%name` when they match [A-Za-z0-9_.]+, else `%"..."` (quoted string with
//    \" \\ \n \t \r \xHH escapes): `%input.1`, `%0`, `%"conv1/weight:0"`.
//  - Op, attribute and graph names and symbolic dims print bare when they match
//    [A-Za-z_?][A-Za-z0-9_.?]* and are no keyword (graph const return tensor true false inf nan _),
//    else quoted. `?` is an unnamed unknown dim. Rank 0: `f32[]`.
//  - A node's name follows its types: `%y = Conv(%x, %w) : f32[1,4,8,8] # name="conv1"`.
//    A node without outputs prints `Op(%x) {...}` (no `=`, no types).
//  - Constant data is the flat row-major element list: floats in the shortest form that reads
//    back to the same bits (inf, -inf, nan allowed; f16/bf16 print their float value), ints
//    exact, bool `true`/`false`. Rank 0: `const %c: f32[] = [1.5]`.
//  - Attributes (sorted by name): int `3`; float always with `.`, exponent or inf/nan (`1.0`,
//    `1e-05`); string `"same"`; lists `[1,2]`, `[0.5,1.0]`, `["a","b"]`; empty lists carry
//    their kind: `[]:ints`, `[]:floats`, `[]:strings`; tensor `tensor<f32[2]>[1, 2.5]`.
//  - `return %a, %b` lists graph outputs (graph inputs and constants allowed); `return` alone
//    for none.
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
