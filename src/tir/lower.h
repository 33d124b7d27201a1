// Lowering: scheduled TE -> tir loop nests.
//
// For each non-inlined stage, in producer-before-consumer order: a loop nest over the stage's
// leaf iter vars (split loops recover the original index as outer*factor+inner and guard the
// tail with an If when the factor does not divide the extent; fused loops recover both with
// floordiv/floormod). A reduction initializes the output element before the reduce loops
// (placed just outside the outermost reduce loop). Inlined stages are substituted into their
// readers. Stages that are not in `args` get an Allocate around the whole body. TensorReads
// become BufferLoads with row-major flat indices.
#pragma once

#include <string>
#include <vector>

#include "te/schedule.h"
#include "tir/stmt.h"

namespace kiln::tir {

/// `args` lists the kernel's parameters in order: placeholders (inputs) and output tensors.
/// Throws kInvalidArgument if a placeholder read by the computation is not in args.
PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args, const std::string& name);

}  // namespace kiln::tir
