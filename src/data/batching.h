// Batching: records stacked field by field along a new leading axis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/pipeline.h"

namespace kiln::data {

/// Stacks `examples` (record ids `records`, for errors) into one batch. Every example must have
/// the same fields with the same dtype and shape; a mismatch is a kiln::Error naming both
/// records, the field and the two types. `what` prefixes errors ("epoch 2, batch 7").
Batch stack_examples(const std::vector<Example>& examples, const std::vector<int64_t>& records,
                     const std::string& what);

}  // namespace kiln::data
