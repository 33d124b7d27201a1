// Microbatches of a pipeline-parallel run (partitioned_run.h): the model's inputs cut along
// their leading (batch) axis into equal parts, and the parts' outputs joined back along it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::distributed {

/// `feeds` cut into `parts` microbatches along axis 0 (copies). Every input's leading dim must
/// be the same multiple of `parts`: otherwise a kInvalidArgument naming the input.
std::vector<std::map<std::string, Tensor>> split_microbatches(const std::map<std::string, Tensor>& feeds, int parts);

/// Output j of every microbatch joined along axis 0 (the microbatches' outputs in order). A
/// scalar output, or outputs whose other dims differ, is a kInvalidArgument naming the output.
std::vector<Tensor> join_microbatches(const std::vector<std::vector<Tensor>>& parts,
                                      const std::vector<std::string>& names);

}  // namespace kiln::distributed
