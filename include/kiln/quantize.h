// Post-training static quantization (docs/quantization.md): run the fp32 model on calibration
// inputs, choose each quantized tensor's scale and zero point, write a QDQ ONNX model that
// Kiln (pass fuse-qdq: int8 kernels) and ONNX Runtime both run, and report each quantized
// layer's error against fp32.
//
//   auto batches = kiln::read_calibration_data("calib.npz", "model.onnx");
//   kiln::QuantizeReport r = kiln::quantize_model("model.onnx", "model.int8.onnx", batches, {});
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln {

/// How an activation's range is chosen from the calibration data.
enum class CalibrationMethod {
    kMinMax,      // the smallest and largest value seen (ORT's MinMax)
    kPercentile,  // the `percentile` and 100-`percentile` percentiles of all values seen
    kEntropy,     // the clipping threshold minimising the KL divergence (TensorRT's calibrator)
};

struct QuantizeOptions {
    CalibrationMethod method = CalibrationMethod::kMinMax;
    double percentile = 99.999;  // kPercentile
    /// Weights of Conv / MatMul / Gemm per output channel (int8 symmetric); else per tensor.
    bool per_channel = true;
    DType activation_type = DType::kUInt8;  // kUInt8 or kInt8
    bool activation_symmetric = false;      // zero point 0 (int8 activations only)
    DType weight_type = DType::kInt8;       // kInt8 (symmetric, [-127, 127])
    /// Node names (or op types) to leave in float.
    std::vector<std::string> exclude;
    /// Op types quantized: Conv, MatMul, Gemm (weights and inputs), Add (both operands quantized
    /// already: residual adds), MaxPool (after a quantized tensor, at its scale).
    std::vector<std::string> op_types = {"Conv", "MatMul", "Gemm", "Add", "MaxPool"};
    /// Measure each quantized layer's error (runs the QDQ model on the calibration data).
    bool report = true;
    int threads = 0;                         // intra-op threads of the calibration runs (0 = all)
    std::map<std::string, int64_t> dims;     // symbolic dims, as SessionOptions::dims
};

/// One quantized tensor: the output of a quantized node (or a graph input feeding one).
struct QuantizedLayer {
    std::string node, op_type;  // the node whose output this is ("" op_type: a graph input)
    std::string tensor;
    float range_min = 0, range_max = 0;  // calibrated range (before widening to include 0)
    float scale = 1;
    int32_t zero_point = 0;
    /// The dequantized tensor of the QDQ model against the fp32 model's, over the report data:
    /// SQNR (dB), ||q - f|| / ||f||, and the largest |q - f| in steps of `scale`. NaN when not
    /// measured (QuantizeOptions::report off).
    double sqnr_db = 0, rel_l2 = 0, max_abs_steps = 0;
};

struct QuantizeReport {
    std::vector<QuantizedLayer> layers;  // model order
    int weights = 0;                     // constants quantized (weights and biases)
    int batches = 0;                     // calibration batches run
    double calibration_seconds = 0, report_seconds = 0;
    std::string method;
    /// One row per layer (node, op, tensor, range, scale, zero point, SQNR, rel L2).
    std::string table() const;
    std::string json() const;
};

/// One calibration input set: a value for every model input.
using CalibrationBatch = std::map<std::string, Tensor>;

/// Reads calibration inputs for `model`: an .npz (arrays named by the model's inputs), or a
/// directory of .npz files (one batch each) or of .npy files (one batch each, for a model with
/// one input), in name order. An array of rank r+1 for an input of rank r is a stack of batches;
/// one of the input's own shape is one batch, and with the model's first dim 1 an array
/// [K, ...] is K batches of one. A missing input or a shape that fits none of these is
/// kInvalidArgument naming the input, expected vs got. Symbolic dims take any size unless bound in
/// `dims`.
std::vector<CalibrationBatch> read_calibration_data(const std::string& path, const std::string& model,
                                                    const std::map<std::string, int64_t>& dims = {});

/// Calibrates `model` on `batches` and writes the QDQ model to `output`. kInvalidArgument for an
/// empty or malformed batch (naming the input, expected vs got).
QuantizeReport quantize_model(const std::string& model, const std::string& output,
                              const std::vector<CalibrationBatch>& batches, const QuantizeOptions& opts = {});

/// Dynamic quantization (no calibration; ONNX Runtime's quantize_dynamic): each MatMul with a
/// constant 2-D f32 weight (not excluded by opts.exclude) gets int8 symmetric weights (per column
/// when opts.per_channel) and its input quantized to u8 at run time: DynamicQuantizeLinear ->
/// MatMulInteger -> Cast -> Mul(a_scale * w_scale). Writes `output`; returns the MatMuls rewritten.
int quantize_dynamic_model(const std::string& model, const std::string& output, const QuantizeOptions& opts = {});

}  // namespace kiln
