// TensorType: element type + shape whose dimensions may be symbolic ("N", "seq").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/dtype.h"
#include "support/tensor.h"

namespace kiln::ir {

/// One dimension: a known size, or a named symbol (value < 0 then).
struct Dim {
    int64_t value = -1;
    std::string symbol;  // non-empty iff symbolic; "?" for an anonymous unknown dimension

    Dim() = default;
    Dim(int64_t v) : value(v) {}  // NOLINT: implicit from an integer is the common case
    static Dim sym(std::string name) {
        Dim d;
        d.symbol = std::move(name);
        return d;
    }
    bool is_static() const { return symbol.empty() && value >= 0; }
    bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
    std::string str() const { return is_static() ? std::to_string(value) : symbol; }
};

/// What a value is: a tensor, a sequence of tensors, or an optional of either. For the
/// non-tensor kinds, dtype and shape describe the elements (shape may be empty when the
/// elements' shapes are not tracked). Only the graph interpreter runs non-tensor values.
enum class TypeKind : uint8_t { kTensor, kSequence, kOptionalTensor, kOptionalSequence };

struct TensorType {
    DType dtype = DType::kFloat32;
    std::vector<Dim> shape;
    TypeKind kind = TypeKind::kTensor;

    TensorType() = default;
    TensorType(DType t, std::vector<Dim> s) : dtype(t), shape(std::move(s)) {}
    static TensorType of_static(DType t, const Shape& s);

    int rank() const { return static_cast<int>(shape.size()); }
    bool is_static() const;
    /// The static shape; throws kInternal if a dimension is symbolic.
    Shape static_shape() const;
    bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape && kind == o.kind; }
    bool is_tensor() const { return kind == TypeKind::kTensor; }
    bool is_sequence() const { return kind == TypeKind::kSequence || kind == TypeKind::kOptionalSequence; }
    bool is_optional() const { return kind == TypeKind::kOptionalTensor || kind == TypeKind::kOptionalSequence; }
    /// "f32[1,3,N,N]"; "seq<f32[2]>", "opt<f32[2]>", "opt<seq<f32[]>>" for the other kinds.
    std::string str() const;
};

}  // namespace kiln::ir
