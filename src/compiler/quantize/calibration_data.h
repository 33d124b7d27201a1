// Calibration inputs: reading them from .npz / .npy files (kiln::read_calibration_data) and
// checking batches against the model's inputs, with errors that name the input and say the
// shape expected vs got.
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/qdq_model.h"
#include "kiln/quantize.h"

namespace kiln::compiler {

/// Checks every batch has exactly the model's inputs, each of the declared dtype and a shape
/// that fits the declared one (symbolic dims free unless bound in `dims`, as --dim binds them). kInvalidArgument
/// naming the batch and input otherwise.
void check_calibration_batches(const std::vector<CalibrationBatch>& batches, const frontend::OnnxGraphView& g,
                               const std::map<std::string, int64_t>& dims);

}  // namespace kiln::compiler
