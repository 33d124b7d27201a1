// AttributeProto -> ir::Attr.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "ir/attr.h"
#include "op/op_def.h"

namespace kiln::frontend {

/// Converts one attribute. Floats widen to double; tensor attributes go through
/// tensor_from_proto (external data resolved against `base_dir`). Graph, sparse-tensor and
/// type-proto attributes are kUnsupported; `where` names the node in messages.
ir::Attr attr_from_proto(const onnx::AttributeProto& a, const std::string& base_dir, const std::string& where);

/// Converts all attributes of a node (duplicate names are kInvalidModel).
ir::AttrMap attrs_from_node(const onnx::NodeProto& node, const std::string& base_dir, const std::string& where);

/// Applies the lossless widenings ONNX exporters rely on: an int where the schema says float,
/// ints where it says floats. Other kind mismatches are left for op::check_node to report.
void coerce_attrs_to_schema(ir::AttrMap& attrs, const op::OpDef& def);

}  // namespace kiln::frontend
