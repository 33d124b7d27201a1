// Ops that only reinterpret their input's bytes. With the same dtype and element count their
// output is a view of the input, never a copy: compile() gives them no kernel, the graph
// interpreter shares the input's data, kernel fusion treats them as data movement.
#pragma once

#include <string>

namespace kiln::op {

/// Reshape, Flatten, Squeeze, Unsqueeze, Identity, KilnReshape, and KilnDeviceCopy (a view of
/// its input on the CPU).
bool is_view_op(const std::string& op);

/// is_view_op's ops and Transpose: the ops that move data without computing on it.
bool is_data_movement_op(const std::string& op);

}  // namespace kiln::op
