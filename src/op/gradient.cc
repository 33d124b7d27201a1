// The GradientBuilder helpers every gradient entry shares (op/gradient.h).
#include "op/gradient.h"

#include "support/error.h"

namespace kiln::op {
namespace {

Tensor filled_tensor(DType dtype, const Shape& shape, double v) {
    Tensor t(dtype, shape);
    const int64_t n = t.numel();
    switch (dtype) {
        case DType::kFloat32: for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = static_cast<float>(v); break;
        case DType::kFloat64: for (int64_t i = 0; i < n; ++i) t.data_as<double>()[i] = v; break;
        case DType::kInt64: for (int64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = static_cast<int64_t>(v); break;
        case DType::kInt32: for (int64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = static_cast<int32_t>(v); break;
        default: KILN_THROW(kUnsupported) << "gradient constant of dtype " << dtype_name(dtype) << " (f32, f64, i32, i64 only)";
    }
    return t;
}

}  // namespace

ir::Value* GradientBuilder::output_grad_or_zeros(size_t i) {
    if (ir::Value* g = output_grad(i)) return g;
    return filled(output(i)->type(), 0.0);
}

ir::Value* GradientBuilder::emit1(const std::string& op, const std::vector<ir::Value*>& inputs, ir::AttrMap attrs) {
    return emit(op, inputs, std::move(attrs), 1).at(0);
}

ir::Value* GradientBuilder::scalar(double v, DType dtype) { return constant(filled_tensor(dtype, {}, v)); }

ir::Value* GradientBuilder::ints(const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
    return constant(std::move(t));
}

ir::Value* GradientBuilder::filled(const ir::TensorType& like, double v) {
    return constant(filled_tensor(like.dtype, like.static_shape(), v));
}

ir::Value* GradientBuilder::reshape(ir::Value* v, const Shape& shape) {
    if (v->type().static_shape() == shape) return v;
    return emit1("Reshape", {v, ints(shape)});
}

ir::Value* GradientBuilder::reduce_to_shape(ir::Value* grad, const ir::TensorType& target) {
    const Shape g = grad->type().static_shape();
    const Shape t = target.static_shape();
    if (g == t) return grad;
    KILN_CHECK(g.size() >= t.size(), kInternal) << "bug in Kiln: reduce_to_shape from " << shape_str(g) << " to "
                                                << shape_str(t) << " (a gradient of lower rank than its operand)";
    const size_t lead = g.size() - t.size();
    std::vector<int64_t> axes;
    for (size_t d = 0; d < g.size(); ++d) {
        if (d < lead) { axes.push_back(static_cast<int64_t>(d)); continue; }
        const int64_t td = t[d - lead];
        KILN_CHECK(td == g[d] || td == 1, kInternal) << "bug in Kiln: reduce_to_shape: " << shape_str(t)
                                                     << " does not broadcast to " << shape_str(g);
        if (td == 1 && g[d] != 1) axes.push_back(static_cast<int64_t>(d));
    }
    ir::Value* summed = axes.empty() ? grad : emit1("ReduceSum", {grad, ints(axes)}, {{"keepdims", int64_t{1}}});
    return reshape(summed, t);
}

}  // namespace kiln::op
