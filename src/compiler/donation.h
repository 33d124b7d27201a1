// Buffer donation: a caller gives an input of a run up to one of its outputs (a training step's
// parameters and optimizer state, w' over w), and the run writes that output over the input's
// memory instead of a fresh buffer: no second copy of the parameters, no pass over fresh pages.
// compile() keeps an offered pair only where writing over the input computes what a fresh
// output would; the runtime orders the writer after every other reader of the input
// (runtime/step_graph.h), and the caller binds the output to the input's tensor
// (RunControls::outputs_into).
#pragma once

#include <utility>
#include <vector>

#include "runtime/executable.h"

namespace kiln::compiler {

/// The pairs of `offers` ((graph output, graph input) positions) that hold in `exe`: the output
/// is a fresh kOutput buffer written by exactly one step, that step may write it over the input
/// (`writes_over[s]`: its (output buffer, input buffer) pairs, each read only at the index it
/// writes), every other step that reads the input comes before it in step order, the two have
/// one dtype and shape, and neither is in another pair. In `offers` order.
std::vector<std::pair<int, int>> verified_donations(const runtime::Executable& exe,
                                                    const std::vector<std::vector<std::pair<int, int>>>& writes_over,
                                                    const std::vector<std::pair<int, int>>& offers);

}  // namespace kiln::compiler
