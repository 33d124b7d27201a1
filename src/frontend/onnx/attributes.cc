// AttributeProto -> ir::Attr.
//
// The attribute's `type` field decides the kind. Very old models (IR version 1) may leave it
// UNDEFINED; then the kind is taken from whichever value field is set, as onnx's own checker
// does. Validation against the op schema (names, kinds, required, defaults) is op::check_node's
// job; this file only converts and widens int -> float where the schema asks for a float.
#include "frontend/onnx/attributes.h"

#include "frontend/onnx/tensor_proto.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

using AP = onnx::AttributeProto;

// The kind of an attribute whose `type` is UNDEFINED, from the populated fields.
AP::AttributeType guess_type(const AP& a) {
    if (a.has_f()) return AP::FLOAT;
    if (a.has_i()) return AP::INT;
    if (a.has_s()) return AP::STRING;
    if (a.has_t()) return AP::TENSOR;
    if (a.has_g()) return AP::GRAPH;
    if (a.floats_size()) return AP::FLOATS;
    if (a.ints_size()) return AP::INTS;
    if (a.strings_size()) return AP::STRINGS;
    if (a.tensors_size()) return AP::TENSORS;
    if (a.graphs_size()) return AP::GRAPHS;
    return AP::UNDEFINED;
}

}  // namespace

std::optional<ir::TensorType> type_from_type_proto(const onnx::TypeProto& tp, bool allow_unknown_shape) {
    const onnx::TypeProto* elem = &tp;
    ir::TypeKind kind = ir::TypeKind::kTensor;
    if (tp.has_optional_type()) {
        elem = &tp.optional_type().elem_type();
        kind = ir::TypeKind::kOptionalTensor;
        allow_unknown_shape = true;
    }
    if (elem->has_sequence_type()) {
        elem = &elem->sequence_type().elem_type();
        kind = kind == ir::TypeKind::kOptionalTensor ? ir::TypeKind::kOptionalSequence : ir::TypeKind::kSequence;
        allow_unknown_shape = true;
    }
    if (!elem->has_tensor_type()) return std::nullopt;
    const auto& tt = elem->tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt) return std::nullopt;
    ir::TensorType t;
    t.dtype = *dt;
    t.kind = kind;
    if (!tt.has_shape()) {
        if (!allow_unknown_shape) return std::nullopt;
        return t;
    }
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() >= 0)
            t.shape.emplace_back(d.dim_value());
        else if (d.has_dim_param() && !d.dim_param().empty())
            t.shape.push_back(ir::Dim::sym(d.dim_param()));
        else
            t.shape.push_back(ir::Dim::sym("?"));
    }
    return t;
}

ir::Attr attr_from_proto(const AP& a, const std::string& base_dir, const std::string& where,
                         const GraphImportFn& import_graph) {
    KILN_CHECK(a.ref_attr_name().empty(), kUnsupported)
        << where << ": attribute '" << a.name() << "' refers to a function attribute, which Kiln does not support";
    AP::AttributeType t = a.type() == AP::UNDEFINED ? guess_type(a) : a.type();
    switch (t) {
        case AP::FLOAT: return static_cast<double>(a.f());
        case AP::INT: return static_cast<int64_t>(a.i());
        case AP::STRING: return a.s();
        case AP::TENSOR:
            return tensor_from_proto(a.t(), base_dir, where + ": attribute '" + a.name() + "'");
        case AP::FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
        case AP::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
        case AP::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
        case AP::GRAPH:
            KILN_CHECK(import_graph != nullptr, kUnsupported)
                << where << ": graph attribute '" << a.name() << "' is not supported here";
            return import_graph(a.g(), a.name());
        case AP::TYPE_PROTO: {
            std::optional<ir::TensorType> ty = type_from_type_proto(a.tp(), /*allow_unknown_shape=*/true);
            KILN_CHECK(ty.has_value(), kUnsupported)
                << where << ": type attribute '" << a.name() << "' names a type Kiln does not support (maps, sparse tensors)";
            return ty->str();
        }
        case AP::UNDEFINED:
            KILN_THROW(kInvalidModel) << where << ": attribute '" << a.name() << "' has no type and no value";
        default:
            break;
    }
    std::string kind = AP::AttributeType_IsValid(t) ? AP::AttributeType_Name(t) : std::to_string(int(t));
    KILN_THROW(kUnsupported) << where << ": attribute '" << a.name() << "' of type " << kind
                             << " is not supported (Kiln handles int, float, string, tensor, graph, type and lists of the first three)";
}

ir::AttrMap attrs_from_node(const onnx::NodeProto& node, const std::string& base_dir, const std::string& where,
                            const GraphImportFn& import_graph) {
    ir::AttrMap out;
    for (const AP& a : node.attribute()) {
        KILN_CHECK(!a.name().empty(), kInvalidModel) << where << ": attribute with an empty name";
        auto [it, inserted] = out.emplace(a.name(), attr_from_proto(a, base_dir, where, import_graph));
        KILN_CHECK(inserted, kInvalidModel) << where << ": attribute '" << a.name() << "' given twice";
    }
    return out;
}

void coerce_attrs_to_schema(ir::AttrMap& attrs, const op::OpDef& def) {
    for (const op::AttrSpec& spec : def.attrs) {
        auto it = attrs.find(spec.name);
        if (it == attrs.end()) continue;
        ir::Attr& v = it->second;
        if (spec.kind == op::AttrKind::kFloat) {
            if (auto* i = std::get_if<int64_t>(&v)) v = static_cast<double>(*i);
        } else if (spec.kind == op::AttrKind::kFloats) {
            if (auto* is = std::get_if<std::vector<int64_t>>(&v)) v = std::vector<double>(is->begin(), is->end());
        }
    }
}

}  // namespace kiln::frontend
