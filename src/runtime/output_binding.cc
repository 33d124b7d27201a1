#include "runtime/output_binding.h"

#include <cstring>

namespace kiln::runtime {

std::vector<const Tensor*> order_outputs_into(const std::vector<TensorInfo>& outputs,
                                              const std::map<std::string, Tensor>* into) {
    if (!into || into->empty()) return {};
    std::vector<const Tensor*> bound(outputs.size(), nullptr);
    for (const auto& [name, t] : *into) {
        size_t i = 0;
        while (i < outputs.size() && outputs[i].name != name) ++i;
        if (i == outputs.size()) {
            std::string names;
            for (const TensorInfo& o : outputs) names += (names.empty() ? "'" : ", '") + o.name + "'";
            KILN_THROW(kInvalidArgument) << "'" << name << "' is not an output of the model (outputs: " << names << ")";
        }
        const TensorInfo& info = outputs[i];
        KILN_CHECK(info.kind == ValueKind::kTensor, kInvalidArgument)
            << "output '" << name << "': only tensor outputs can be written into a given tensor (this one is a "
            << (info.kind == ValueKind::kSequence ? "sequence" : "optional") << ")";
        KILN_CHECK(t.dtype() == info.dtype && t.dtype() != DType::kString, kInvalidArgument)
            << "output '" << name << "': bound tensor expected dtype " << dtype_name(info.dtype) << ", got "
            << dtype_name(t.dtype()) << (t.dtype() == DType::kString ? " (string outputs cannot be bound)" : "");
        KILN_CHECK(t.data() != nullptr || t.numel() == 0, kInvalidArgument)
            << "output '" << name << "': bound tensor has no data";
        bound[i] = &t;
    }
    return bound;
}

void check_output_into(const TensorInfo& info, const Tensor& bound, const Shape& shape) {
    KILN_CHECK(bound.shape() == shape, kInvalidArgument)
        << "output '" << info.name << "': bound tensor expected " << dtype_name(info.dtype) << shape_str(shape)
        << ", got " << dtype_name(bound.dtype()) << shape_str(bound.shape());
}

void copy_outputs_into(const std::vector<TensorInfo>& outputs, const std::vector<const Tensor*>& bound,
                       std::vector<Datum>& outs) {
    for (size_t i = 0; i < bound.size() && i < outs.size(); ++i) {
        if (!bound[i]) continue;
        const Tensor& got = outs[i].tensor("output '" + outputs[i].name + "'");
        check_output_into(outputs[i], *bound[i], got.shape());
        Tensor dst = *bound[i];  // shares the caller's storage
        if (got.data() != dst.data() && got.nbytes()) std::memcpy(dst.data(), got.data(), got.nbytes());
        outs[i] = Datum(dst);
    }
}

}  // namespace kiln::runtime
