// Which units run as the runtime's blocked attention (runtime/attention_kernel.h): one
// KilnBlockedAttention node (pass/fuse_long_attention.h writes it), float32, static shapes.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "topi/dnnl_match.h"

namespace kiln::topi {

/// The kiln_attention kernel computing the unit, or nullopt. `inputs` and `outputs` are the
/// unit's arguments in order (the kernel's args are inputs then outputs).
std::optional<ExternChoice> match_blocked_attention(const std::vector<ir::Node*>& nodes,
                                                    const std::vector<ir::Value*>& inputs,
                                                    const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
