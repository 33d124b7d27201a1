// BatchNormalization (inference). (Softmax lives in softmax_family.cc, ArgMax in reduce.cc.)
//
// BatchNormalization: per-channel stages inv = scale / sqrt(var + eps) and
// shift = B - mean * inv, then y = x * inv[c] + shift[c].
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef batch_norm_op() {
    OpDef d;
    d.name = "BatchNormalization";
    d.onnx_versions = {1, 6, 7, 9, 14, 15};
    d.min_inputs = d.max_inputs = 5;
    d.max_outputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"momentum", AttrKind::kFloat, ir::Attr(0.9)},
               {"training_mode", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        KILN_CHECK(n.attr_int("training_mode", 0) == 0, kUnsupported)
            << node_label(n) << ": training_mode=1 is not supported (inference only)";
        KILN_CHECK(n.num_outputs() == 1, kUnsupported)
            << node_label(n) << ": outputs running_mean / running_var exist only in training mode, which is not supported";
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 2, kInvalidModel)
            << node_label(n) << ": input X must have rank >= 2 (N, C, ...), got rank " << x.rank();
        const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
        for (size_t i = 1; i < 5; ++i) {
            const auto& t = input_type(n, i, names[i]);
            KILN_CHECK(t.dtype == x.dtype || dtype_is_float(t.dtype), kInvalidModel)
                << node_label(n) << ": input " << names[i] << " has dtype " << dtype_name(t.dtype);
            KILN_CHECK(t.rank() == 1 && (!t.shape[0].is_static() || !x.shape[1].is_static() || t.shape[0] == x.shape[1]),
                       kInvalidModel)
                << node_label(n) << ": input " << names[i] << " must have shape [" << x.shape[1].str() << "], got "
                << dims_str(t.shape);
        }
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), scale = a.in(1), bias = a.in(2), mean = a.in(3), var = a.in(4);
        const DType cdt = te::compute_dtype(a.out_dtype());
        const double eps = a.node.attr_float("epsilon", 1e-5);
        const int64_t c = x->shape[1];
        auto rd = [&](const te::Tensor& t, const Var& i) { return te::cast(cdt, te::read(t, {Expr(i)})); };
        te::Tensor inv = te::compute(
            {c}, [&](const std::vector<Var>& i) {
                return rd(scale, i[0]) / te::unary(te::UnaryOp::kSqrt, rd(var, i[0]) + te::make_const(cdt, eps));
            },
            "bn_inv", cdt);
        te::Tensor shift = te::compute(
            {c}, [&](const std::vector<Var>& i) { return rd(bias, i[0]) - rd(mean, i[0]) * te::read(inv, {Expr(i[0])}); },
            "bn_shift", cdt);
        te::Tensor y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                return te::read(x, i) * te::read(inv, {Expr(i[1])}) + te::read(shift, {Expr(i[1])});
            },
            "BatchNormalization", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
    r.add(batch_norm_op());
}

}  // namespace kiln::op
