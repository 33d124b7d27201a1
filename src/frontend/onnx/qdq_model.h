// The ONNX side of post-training quantization (compiler/quantize/): what the quantizer reads
// of a model (its main graph's nodes and initializers), the model with intermediate tensors
// exposed as outputs (for calibration), and the model rewritten into QDQ form
// (QuantizeLinear -> DequantizeLinear pairs on activations, DequantizeLinear on quantized
// weights), the format ONNX Runtime's quantize_static writes and fuse-qdq (pass/fuse_qdq.h) reads.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/tensor.h"

namespace onnx {
class GraphProto;
}

namespace kiln::frontend {

/// Removes the initializers and Constant nodes nothing reads (and those initializers' graph-input
/// entries).
void drop_unused_initializers(onnx::GraphProto& g);

/// One node of the main graph as the quantizer sees it.
struct OnnxNodeView {
    std::string name;  // the node's name, or "<op_type>_<index>" when it has none
    std::string op_type;
    std::vector<std::string> inputs;  // "" for an absent optional input
    std::vector<std::string> outputs;
    std::map<std::string, double> float_attrs;  // scalar float/int attributes (alpha, transB, min, ...)
};

/// The main graph of an ONNX model.
struct OnnxGraphView {
    std::vector<OnnxNodeView> nodes;  // model order
    std::vector<std::string> inputs;  // graph inputs that are not initializers
    /// Their declared shapes (-1: a symbolic or unknown dim; absent: no shape) and dtypes.
    std::map<std::string, std::vector<int64_t>> input_shapes;
    std::map<std::string, std::vector<std::string>> input_dim_names;  // dim_param per dim ("" if none)
    std::map<std::string, DType> input_dtypes;
    std::vector<std::string> outputs;
    std::set<std::string> initializers;  // initializer and Constant-node outputs
    int opset = 0;                       // of the default domain
};

/// Reads `path` (kIOError / kInvalidModel when it cannot).
OnnxGraphView read_onnx_graph_view(const std::string& path);

/// The values of the named initializers (or Constant nodes) of `path`; kInvalidArgument naming
/// one that is not there.
std::map<std::string, Tensor> read_onnx_constants(const std::string& path, const std::set<std::string>& names);

/// The serialized model with `names` appended to the graph outputs (untyped; names already
/// outputs are skipped) and external data embedded, so it can be loaded from anywhere.
std::string onnx_with_extra_outputs(const std::string& path, const std::vector<std::string>& names);

/// A tensor quantized on the activation path: QuantizeLinear then DequantizeLinear.
struct QdqActivation {
    std::string tensor;
    float scale = 1.0f;
    int32_t zero_point = 0;
    DType dtype = DType::kUInt8;  // kUInt8 or kInt8
};

/// A constant replaced by DequantizeLinear(quantized, scale, zero_point) for the given uses.
struct QdqConstant {
    std::string tensor;      // the float initializer
    std::string dq_output;   // the name the uses read
    Tensor quantized;        // int8 weights / int32 bias, the initializer's shape
    Tensor scale;            // f32 scalar (per tensor) or [C] (per channel)
    int axis = -1;           // per-channel axis; -1: per tensor
    std::vector<std::pair<int, int>> uses;  // (node index, input index) rewired to dq_output
};

/// The rewrite onnx_to_qdq performs.
struct QdqSpec {
    std::vector<QdqActivation> activations;
    std::vector<QdqConstant> constants;
    /// Relu / Clip nodes (indices) dropped: their input's producer writes their output, and the
    /// QuantizeLinear after it saturates exactly as they did.
    std::vector<int> removed_activations;
    /// Tensors whose dequantized value becomes an extra graph output (the error report).
    std::vector<std::string> expose;
};

/// The name DequantizeLinear writes for the quantized activation `tensor`.
std::string qdq_dequantized_name(const std::string& tensor);

/// The serialized QDQ model. Float initializers left without a use are dropped; a quantized
/// graph output keeps its name (it becomes the DequantizeLinear's output). kInvalidArgument
/// when the model's opset is below 10 (no QuantizeLinear) or below 13 with per-channel constants.
std::string onnx_to_qdq(const std::string& path, const QdqSpec& spec);

/// A MatMul (node index) whose constant weight becomes int8 with its activation quantized at run
/// time (dynamic quantization, ORT's quantize_dynamic in QOperator form):
///   a -> DynamicQuantizeLinear -> (a_q u8, a_s, a_zp)
///   MatMulInteger(a_q, w_q, a_zp) -> Cast(float) -> Mul(a_s * w_s) -> the MatMul's output.
struct DynamicMatMul {
    int node = -1;
    Tensor weight;  // int8, the weight's shape
    Tensor scale;   // f32 [N] (per column) or [] (per tensor)
};

/// The serialized model with each listed MatMul rewritten as above (float weights left without
/// a use dropped). kInvalidArgument when the opset is below 11 (no DynamicQuantizeLinear).
std::string onnx_to_dynamic(const std::string& path, const std::vector<DynamicMatMul>& matmuls);

}  // namespace kiln::frontend
