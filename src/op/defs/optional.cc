// Optional ops (opset 15+) as host kernels (op/host.h). A present optional is its element (a
// tensor or a sequence) and an empty one is Datum::none(), so:
//  - Optional(x) is x; Optional() with no input is empty (its `type` attribute, a TypeProto in
//    ONNX, only types the empty value: the importer passes it as a string or drops it);
//  - OptionalHasElement is false for an empty optional or an omitted input (opset 18), else true;
//  - OptionalGetElement passes the element through (opset 18 also takes a plain tensor or
//    sequence) and is a kInvalidArgument error on an empty optional.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

/// The element type a `type` attribute string names ("f32[2]", "seq<f32>", "opt<seq<i64[]>>"):
/// best effort, f32 tensor when absent or unreadable.
ir::TensorType type_from_attr(const ir::Node& n) {
    std::string s = n.attr_string("type", "");
    ir::TensorType t;
    t.kind = ir::TypeKind::kOptionalTensor;
    auto strip = [&s](const std::string& prefix) {
        if (s.rfind(prefix, 0) != 0) return false;
        s = s.substr(prefix.size());
        return true;
    };
    strip("opt<");
    if (strip("seq<")) t.kind = ir::TypeKind::kOptionalSequence;
    size_t end = s.find_first_of("[<>(");
    if (auto dt = dtype_from_name(s.substr(0, end)); dt.has_value()) t.dtype = *dt;
    return t;
}

ir::TensorType as_optional(ir::TensorType t) {
    if (t.kind == ir::TypeKind::kTensor) t.kind = ir::TypeKind::kOptionalTensor;
    if (t.kind == ir::TypeKind::kSequence) t.kind = ir::TypeKind::kOptionalSequence;
    return t;
}

ir::TensorType as_element(ir::TensorType t) {
    if (t.kind == ir::TypeKind::kOptionalTensor) t.kind = ir::TypeKind::kTensor;
    if (t.kind == ir::TypeKind::kOptionalSequence) t.kind = ir::TypeKind::kSequence;
    return t;
}

OpDef optional_op() {
    OpDef d;
    d.name = "Optional";
    d.onnx_versions = {15};
    d.min_inputs = 0;
    d.max_inputs = 1;
    d.attrs = {{"type", AttrKind::kString, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        return std::vector<ir::TensorType>{has_input(n, 0) ? as_optional(n.input(0)->type()) : type_from_attr(n)};
    };
    d.host = [](const HostArgs& a) {
        return std::vector<Datum>{a.has_input(0) ? a.inputs[0] : Datum::none()};
    };
    return d;
}

OpDef optional_has_element_op() {
    OpDef d;
    d.name = "OptionalHasElement";
    d.onnx_versions = {15, 18};
    d.min_inputs = 0;
    d.max_inputs = 1;
    d.infer = [](const ir::Node&) { return std::vector<ir::TensorType>{{DType::kBool, {}}}; };
    d.host = [](const HostArgs& a) {
        Tensor out(DType::kBool, {});
        out.set_i64(0, a.has_input(0) ? 1 : 0);
        return std::vector<Datum>{out};
    };
    return d;
}

OpDef optional_get_element_op() {
    OpDef d;
    d.name = "OptionalGetElement";
    d.onnx_versions = {15, 18};
    d.infer = [](const ir::Node& n) {
        return std::vector<ir::TensorType>{as_element(input_type(n, 0, "input"))};
    };
    d.host = [](const HostArgs& a) {
        KILN_CHECK(a.has_input(0), kInvalidArgument)
            << node_label(a.node) << ": the optional input is empty (it has no element to get)";
        return std::vector<Datum>{a.inputs[0]};
    };
    return d;
}

}  // namespace

void register_optional_ops(OpRegistry& r) {
    r.add(optional_op());
    r.add(optional_get_element_op());
    r.add(optional_has_element_op());
}

}  // namespace kiln::op
