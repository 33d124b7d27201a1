// RunOptions::outputs_into (ONNX Runtime's IOBinding): outputs the run writes into the caller's
// tensors. What every kiln::Session implementation checks of them, and the copy-in for runs that
// cannot write in place (the graph interpreter, the VM).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/datum.h"
#include "kiln/session.h"

namespace kiln::runtime {

/// Per model output (in `outputs` order) the tensor `into` binds it to, or null; empty when
/// `into` is null or empty. Throws kInvalidArgument for a name that is no output of the model, a
/// sequence or optional output, or a tensor of another dtype, naming the output.
std::vector<const Tensor*> order_outputs_into(const std::vector<TensorInfo>& outputs,
                                              const std::map<std::string, Tensor>* into);

/// Throws kInvalidArgument unless `bound` has `shape`, the shape output `info` has at this run:
/// "output 'y': bound tensor expected f32[2,4], got f32[2,5]".
void check_output_into(const TensorInfo& info, const Tensor& bound, const Shape& shape);

/// For a run that computed fresh outputs: each bound output's value (checked with
/// check_output_into) is copied into its tensor, which then takes its place in `outs`.
void copy_outputs_into(const std::vector<TensorInfo>& outputs, const std::vector<const Tensor*>& bound,
                       std::vector<Datum>& outs);

}  // namespace kiln::runtime
