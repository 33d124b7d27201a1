// Datum: one run-time value of any ONNX type Kiln runs — a tensor (any dtype, strings included),
// a sequence of tensors, or an empty optional. A present optional is simply its element: being
// optional is a property of the static type (ir::TypeKind), not of the value.
//
// Compiled executables see only tensors; Datums are what the graph interpreter
// (compiler/graph_interpreter.h), host kernels (op/host.h) and Session::run_values pass around.
#pragma once

#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class Datum {
public:
    enum class Kind { kNone, kTensor, kSequence };

    /// An empty optional.
    Datum() = default;
    Datum(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT: a tensor is a Datum
    static Datum none() { return Datum(); }
    /// A sequence of tensors of dtype `elem` (kept for an empty sequence's type).
    static Datum sequence(DType elem, std::vector<Tensor> items);

    Kind kind() const { return kind_; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_tensor() const { return kind_ == Kind::kTensor; }
    bool is_sequence() const { return kind_ == Kind::kSequence; }

    /// The tensor; a kInvalidArgument error naming `what` when this is not a tensor.
    const Tensor& tensor(const std::string& what = "value") const;
    /// The sequence's tensors; a kInvalidArgument error naming `what` when this is not a sequence.
    const std::vector<Tensor>& items(const std::string& what = "value") const;
    /// Element dtype of a sequence, or the dtype of a tensor.
    DType elem_dtype() const { return kind_ == Kind::kTensor ? tensor_.dtype() : elem_; }

    /// "f32[2,3]", "seq<f32>(3)", "none" — for error messages.
    std::string str() const;

private:
    Kind kind_ = Kind::kNone;
    Tensor tensor_;
    DType elem_ = DType::kFloat32;
    std::vector<Tensor> items_;
};

}  // namespace kiln
