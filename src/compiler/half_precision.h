// FP16 inference on the GPU (kiln run --device cuda --gpu-math fp16): a graph that computes in
// FP32 rewritten to compute in FP16, as ONNX Runtime's float16 converter does with keep_io_types:
// FP32 graph inputs are cast to FP16 where they enter, FP32 outputs cast back (under their own
// names, so callers see the model's signature), FP32 constants stored as FP16, and every node's
// types re-inferred in order. Generated kernels load and store FP16 and compute in FP32
// (te::compute_dtype); cuDNN and cuBLAS take FP16 operands with FP32 accumulation.
#pragma once

#include "ir/graph.h"

namespace kiln::compiler {

/// Rewrites `g` (types inferred, topologically ordered) to FP16 as above. Inputs whose FP32
/// type their op requires (Resize's roi and scales) and what Cast, Shape and Size read stay as
/// they are. Returns how many FP32 values were given an FP16 form (constants and casts).
int convert_to_half(ir::Graph& g);

/// An FP32 tensor's values as FP16 (round to nearest even; finite values beyond FP16's range
/// saturate at +-65504), and back.
Tensor as_half(const Tensor& t);
Tensor as_float(const Tensor& t);

}  // namespace kiln::compiler
