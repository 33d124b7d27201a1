// ONNX import: ModelProto (protobuf) -> ir::Graph.
//
// Generic over ops: attributes are validated against OpDef::attrs and the node's opset against
// OpDef::onnx_versions; ops whose older opsets differ in form (Clip-6 min/max attributes,
// Softmax-1/11 2-D coercion, Reshape-1 shape attribute, ...) are rewritten by adapters
// (frontend/onnx/adapters.cc) into the canonical form. Constant nodes become graph constants.
// Initializers may live in external data files (resolved relative to the model's directory).
// Errors are kiln::Error naming the node, its op and the opset.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"
#include "support/datum.h"
#include "support/tensor.h"

namespace kiln::frontend {

ir::Graph import_onnx_file(const std::string& path);

/// What an ONNX model says about itself besides its graph, by key: producer_name,
/// producer_version, domain, model_version, doc_string, graph_name, graph_doc_string, opset_import
/// ("ai.onnx:17,com.microsoft:1") and each metadata_props entry as "metadata.<key>". Empty
/// fields are left out.
using ModelFacts = std::map<std::string, std::string>;
/// import_onnx_file that also fills `facts` (from the same parse).
ir::Graph import_onnx_file(const std::string& path, ModelFacts* facts);
/// `base_dir` resolves external data locations.
ir::Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir = ".");

/// Reads a serialized TensorProto (.pb files of the ONNX test suite).
Tensor read_tensor_proto_file(const std::string& path);

/// Reads a .pb file holding a value of type `type`: a TensorProto for a tensor, a SequenceProto
/// (of tensors) for a sequence, an OptionalProto for an optional (empty: Datum::none()).
/// Maps and sparse tensors are kUnsupported.
Datum read_value_proto_file(const std::string& path, const ir::TensorType& type);

}  // namespace kiln::frontend
