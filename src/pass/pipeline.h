// The pass pipeline: which passes run at -O0 .. -O3, in which order (pipeline.cc, STYLE rule 2).
#pragma once

#include <vector>

#include "pass/pass.h"

namespace kiln::pass {

/// Highest optimization level; -O3 is the default of `kiln run`/`kiln inspect` and Sessions.
constexpr int kMaxOptLevel = 3;

/// Every pass of the pipeline, in order (whatever its level): `kiln inspect --print-after`
/// accepts these names.
const std::vector<Pass>& all_passes();

/// The passes that run at `opt_level` (0..3), in order. Throws kInvalidArgument outside 0..3.
std::vector<Pass> passes_for_level(int opt_level);

}  // namespace kiln::pass
