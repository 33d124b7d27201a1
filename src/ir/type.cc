// TensorType helpers: static-shape conversion and the "f32[1,3,N,8]" text form.
#include "ir/type.h"

#include "ir/text_format.h"
#include "support/error.h"

namespace kiln::ir {

TensorType TensorType::of_static(DType t, const Shape& s) {
    std::vector<Dim> dims;
    dims.reserve(s.size());
    for (int64_t d : s) dims.emplace_back(d);
    return TensorType(t, std::move(dims));
}

bool TensorType::is_static() const {
    for (const Dim& d : shape)
        if (!d.is_static()) return false;
    return true;
}

Shape TensorType::static_shape() const {
    Shape s;
    s.reserve(shape.size());
    for (const Dim& d : shape) {
        KILN_ICHECK(d.is_static())
            << "static_shape() of a type with a symbolic dimension: " << str();
        s.push_back(d.value);
    }
    return s;
}

std::string TensorType::str() const {
    std::string out = dtype_name(dtype);
    out += '[';
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) out += ',';
        const Dim& d = shape[i];
        if (d.is_static())
            out += std::to_string(d.value);
        else if (d.symbol.empty())
            out += '?';  // an unnamed unknown dimension
        else
            out += identifier_or_quoted(d.symbol);
    }
    out += ']';
    switch (kind) {
        case TypeKind::kTensor: return out;
        case TypeKind::kSequence: return "seq<" + out + ">";
        case TypeKind::kOptionalTensor: return "opt<" + out + ">";
        case TypeKind::kOptionalSequence: return "opt<seq<" + out + ">>";
    }
    return out;
}

}  // namespace kiln::ir
