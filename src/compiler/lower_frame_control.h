// compile()'s lowering of a TF1 control-flow node (Switch, Merge, Enter, Exit, NextIteration;
// op/defs/tf_control_flow.cc) to a runtime control step: no kernel, its attributes as the
// step's parameters (runtime KernelDesc::control_params), its args every input and output slot.
#pragma once

#include <unordered_map>
#include <vector>

#include "compiler/lower_group.h"
#include "ir/graph.h"

namespace kiln::compiler {

/// Whether `unit` is one control-flow node (OpDef::frame_control).
bool is_frame_control_unit(const KernelUnit& unit);

/// The control step of the unit's node: control = op, control_params = its attributes.
LoweredKernel lower_frame_control(const KernelUnit& unit);

/// The node's buffer ids: every input slot then every output (a unit's inputs are deduplicated
/// and its outputs only those read elsewhere; a control step needs each slot: Switch(p, p)).
std::vector<int> frame_control_args(const ir::Node& n, const std::unordered_map<const ir::Value*, int>& buffer_of);

}  // namespace kiln::compiler
