// Text form of attributes and constant data (shared by the printer and error messages).
//
// Lists print without spaces ("[1,1]"), constant data with ", ". Floats always carry a '.', an
// exponent or inf/nan so that the parser reads them back as floats; an empty list carries its
// kind ("[]:ints") since "[]" alone would be ambiguous.
#include "ir/attr.h"

#include "ir/graph.h"
#include "ir/text_format.h"
#include "ir/type.h"

namespace kiln::ir {
namespace {
// A sub-graph prints as a summary; `kiln inspect` of an interpreted model shows nesting this way.
std::string graph_attr_str(const Graph& g) {
    return "graph<" + quote_string(g.name) + ", " + std::to_string(g.inputs().size()) + " inputs, " +
           std::to_string(g.num_nodes()) + " nodes, " + std::to_string(g.outputs().size()) + " outputs>";
}
std::string float_attr_str(double v) {
    std::string s = format_f64(v);
    if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // "1" -> "1.0"; keeps e/inf/nan
    return s;
}

template <typename T, typename F>
std::string list_str(const std::vector<T>& xs, const char* kind, F&& fmt) {
    if (xs.empty()) return std::string("[]:") + kind;
    std::string out = "[";
    for (size_t i = 0; i < xs.size(); ++i) {
        if (i) out += ',';
        out += fmt(xs[i]);
    }
    return out + "]";
}

std::string element_str(const Tensor& t, int64_t i) {
    const char* p = static_cast<const char*>(t.data()) + i * dtype_size(t.dtype());
    switch (t.dtype()) {
        case DType::kFloat32:
            return format_f32(*reinterpret_cast<const float*>(p));
        case DType::kFloat64:
            return format_f64(*reinterpret_cast<const double*>(p));
        case DType::kFloat16:
            return format_f32(half_to_float(*reinterpret_cast<const uint16_t*>(p)));
        case DType::kBFloat16:
            return format_f32(bfloat16_to_float(*reinterpret_cast<const uint16_t*>(p)));
        case DType::kUInt64:
            return std::to_string(*reinterpret_cast<const uint64_t*>(p));
        case DType::kBool:
            return *reinterpret_cast<const uint8_t*>(p) ? "true" : "false";
        case DType::kString:
            return quote_string(t.data_as<std::string>()[i]);
        default:
            if (dtype_is_lowp_float(t.dtype())) return format_f32(static_cast<float>(t.get_f64(i)));
            return std::to_string(t.get_i64(i));
    }
}
}  // namespace

const char* attr_kind_name(const Attr& a) {
    static const char* const kNames[] = {"int",    "float",   "string", "ints",
                                         "floats", "strings", "tensor", "graph"};
    return kNames[a.index()];
}

std::string tensor_data_str(const Tensor& t) {
    std::string out = "[";
    for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) out += ", ";
        out += element_str(t, i);
    }
    return out + "]";
}

std::string attr_str(const Attr& a) {
    switch (a.index()) {
        case 0:
            return std::to_string(std::get<int64_t>(a));
        case 1:
            return float_attr_str(std::get<double>(a));
        case 2:
            return quote_string(std::get<std::string>(a));
        case 3:
            return list_str(std::get<std::vector<int64_t>>(a), "ints",
                            [](int64_t v) { return std::to_string(v); });
        case 4:
            return list_str(std::get<std::vector<double>>(a), "floats", float_attr_str);
        case 5:
            return list_str(std::get<std::vector<std::string>>(a), "strings",
                            [](const std::string& s) { return quote_string(s); });
        case 7:
            return graph_attr_str(*std::get<GraphAttr>(a));
        default: {
            const Tensor& t = std::get<Tensor>(a);
            return "tensor<" + TensorType::of_static(t.dtype(), t.shape()).str() + ">" +
                   tensor_data_str(t);
        }
    }
}

}  // namespace kiln::ir
