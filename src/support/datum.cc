#include "support/datum.h"

#include "support/error.h"

namespace kiln {

Datum Datum::sequence(DType elem, std::vector<Tensor> items) {
    Datum d;
    d.kind_ = Kind::kSequence;
    d.elem_ = elem;
    for (const Tensor& t : items)
        KILN_CHECK(t.dtype() == elem, kInvalidArgument)
            << "a sequence of " << dtype_name(elem) << " tensors cannot hold a " << dtype_name(t.dtype()) << " tensor";
    d.items_ = std::move(items);
    return d;
}

const Tensor& Datum::tensor(const std::string& what) const {
    KILN_CHECK(is_tensor(), kInvalidArgument) << what << ": expected a tensor, got " << str();
    return tensor_;
}

const std::vector<Tensor>& Datum::items(const std::string& what) const {
    KILN_CHECK(is_sequence(), kInvalidArgument) << what << ": expected a sequence, got " << str();
    return items_;
}

std::string Datum::str() const {
    switch (kind_) {
        case Kind::kNone: return "none";
        case Kind::kTensor: return std::string(dtype_name(tensor_.dtype())) + shape_str(tensor_.shape());
        case Kind::kSequence:
            return "seq<" + std::string(dtype_name(elem_)) + ">(" + std::to_string(items_.size()) + ")";
    }
    return "?";
}

}  // namespace kiln
