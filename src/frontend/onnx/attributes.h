// AttributeProto -> ir::Attr.
#pragma once

#include <functional>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/attr.h"
#include "op/op_def.h"

namespace kiln::frontend {

/// Imports a sub-graph attribute (the importer's, which resolves outer-scope names).
using GraphImportFn = std::function<ir::GraphAttr(const onnx::GraphProto&, const std::string& attr_name)>;

/// Converts one attribute. Floats widen to double; tensor attributes go through
/// tensor_from_proto (external data resolved against `base_dir`); a graph attribute goes through
/// `import_graph` (kUnsupported when none is given); a type-proto attribute (Optional's `type`)
/// becomes its text ("seq<f32[]>"). Sparse tensors and lists of tensors/graphs are kUnsupported;
/// `where` names the node in messages.
ir::Attr attr_from_proto(const onnx::AttributeProto& a, const std::string& base_dir, const std::string& where,
                         const GraphImportFn& import_graph = {});

/// Converts all attributes of a node (duplicate names are kInvalidModel).
ir::AttrMap attrs_from_node(const onnx::NodeProto& node, const std::string& base_dir, const std::string& where,
                            const GraphImportFn& import_graph = {});

/// The Kiln type of an ONNX TypeProto: tensor, sequence of tensor, optional of either, with
/// string elements allowed; nullopt for maps, sparse tensors, nested sequences or an unknown
/// element type. A tensor without a shape gets rank 0 when `allow_unknown_shape` (sequence
/// elements and optionals usually carry none), else nullopt.
std::optional<ir::TensorType> type_from_type_proto(const onnx::TypeProto& tp, bool allow_unknown_shape);

/// Applies the lossless widenings ONNX exporters rely on: an int where the schema says float,
/// ints where it says floats. Other kind mismatches are left for op::check_node to report.
void coerce_attrs_to_schema(ir::AttrMap& attrs, const op::OpDef& def);

}  // namespace kiln::frontend
