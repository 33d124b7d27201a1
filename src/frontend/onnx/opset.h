// Opset version selection for one op.
#pragma once

#include <string>

#include "op/op_def.h"

namespace kiln::frontend {

/// The ONNX since-version of `def` that applies at model opset `opset`: the largest entry of
/// def.onnx_versions <= opset. None: kUnsupported "op 'Relu' opset 5 not supported (Kiln
/// implements versions 6, 13, 14)".
int select_since_version(const op::OpDef& def, int opset);

}  // namespace kiln::frontend
