// The per-layer error report of kiln::quantize_model: each quantized tensor of the QDQ model
// (its DequantizeLinear output) against the same tensor of the fp32 model, accumulated over the
// calibration batches.
#pragma once

#include "kiln/quantize.h"
#include "support/tensor.h"

namespace kiln::compiler {

/// Sums over all batches of one tensor's fp32 reference f and quantized value q.
struct LayerError {
    double ref_sq = 0, err_sq = 0, max_abs = 0;
    /// Adds one batch (f32 tensors of one shape; kInvalidArgument otherwise, naming `tensor`).
    void add(const std::string& tensor, const Tensor& f, const Tensor& q);
    /// Fills layer.sqnr_db (inf when q == f), rel_l2 and max_abs_steps.
    void finish(QuantizedLayer& layer) const;
};

}  // namespace kiln::compiler
