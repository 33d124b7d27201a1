// Lowering: scheduled TE -> tir loop nests.
//
// For each non-inlined stage, in producer-before-consumer order: a loop nest over the stage's
// leaf iter vars (split loops recover the original index as outer*factor+inner and guard the
// tail with an If when the factor does not divide the extent; fused loops recover both with
// floordiv/floormod). A reduction initializes the output element before the reduce loops
// (placed just outside the outermost reduce loop). Inlined stages are substituted into their
// readers. Stages that are not in `args` get an Allocate around the whole body. TensorReads
// become BufferLoads with row-major flat indices.
//
// Symbolic shapes (te/dims.h): extents, strides and allocation sizes become int64 expressions
// of the kernel's dims. A split of a symbolic extent E by f runs floordiv(E, f) full tiles with
// no guard (an inner constant-extent loop stays vectorizable) and then one guarded partial tile,
// which simplify() turns into a loop of floormod-like extent.
#pragma once

#include <string>
#include <vector>

#include "te/schedule.h"
#include "tir/stmt.h"

namespace kiln::tir {

/// `args` lists the kernel's parameters in order: placeholders (inputs) and output tensors.
/// Throws kInvalidArgument if a placeholder read by the computation is not in args.
/// The kernel's symbolic dims (PrimFunc::dims) are the Vars of the args' symbolic shapes, in
/// first-appearance order.
PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args, const std::string& name);
/// As above with the dims' order given; every Var of a shape or loop extent must be among them.
PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args, const std::string& name,
               const std::vector<Var>& dims);

}  // namespace kiln::tir
