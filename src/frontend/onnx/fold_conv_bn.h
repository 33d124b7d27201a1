// Folds inference-mode BatchNormalization into the Conv before it, on the ONNX model: the
// pre-processing ONNX Runtime asks for before quantize_static (quant_pre_process), so that the
// quantized Conv carries the BN's scale in its int8 weights instead of a float BN sitting
// between two QDQ pairs (which keeps the conv out of the int8 kernels).
#pragma once

#include <optional>
#include <string>

namespace kiln::frontend {

/// The serialized model with every Conv -> BatchNormalization pair folded (the Conv's output
/// read only by the BN, weight and BN parameters constant f32, one BN output), external data
/// embedded; nullopt when the model has no such pair. W' = W * s, b' = (b - mean) * s + B with
/// s = scale / sqrt(var + epsilon) per output channel; the Conv writes the BN's output.
std::optional<std::string> fold_conv_batchnorm(const std::string& path);

}  // namespace kiln::frontend
