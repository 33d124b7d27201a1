// Generator ops: outputs made from constants and indices, never from input data.
//  - Range (11): start/limit/delta are constant scalars (value inputs, they fix the length);
//    n = max(ceil((limit - start) / delta), 0), out[i] = start + i * delta (integers exact).
//  - ConstantOfShape (9/20/21/23): the constant `input` shape; the `value` tensor attribute
//    (one element, default f32 0) gives dtype and fill value.
//  - EyeLike (9/22): 2-D; out[i, j] = (j - i == k) ? 1 : 0 in `dtype` (default: the input's).
//  - KilnDimRange (internal): 0, 1, ... along a dim of its input (symbolic compiles' Range).
#include <cmath>
#include <string>

#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

int64_t range_count(const ir::Node& n) {
    const Tensor& s = constant_scalar(n, 0, "start");
    const Tensor& l = constant_scalar(n, 1, "limit");
    const Tensor& dl = constant_scalar(n, 2, "delta");
    if (dtype_is_int(s.dtype())) {
        const int64_t a = s.get_i64(0), b = l.get_i64(0), step = dl.get_i64(0);
        KILN_CHECK(step != 0, kInvalidModel) << node_label(n) << ": delta must be nonzero";
        const int64_t span = b - a;
        int64_t q = span / step;
        if (q * step != span && ((span > 0) == (step > 0))) ++q;  // ceil for same signs
        return std::max<int64_t>(q, 0);
    }
    const double step = dl.get_f64(0);
    KILN_CHECK(step != 0.0, kInvalidModel) << node_label(n) << ": delta must be nonzero";
    return std::max<int64_t>(static_cast<int64_t>(std::ceil((l.get_f64(0) - s.get_f64(0)) / step)), 0);
}

OpDef range_op() {
    OpDef d;
    d.name = "Range";
    d.onnx_versions = {11};
    d.min_inputs = d.max_inputs = 3;
    d.value_inputs = {0, 1, 2};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& s = input_type(n, 0, "start");
        check_dtype(n, "start", s.dtype, {DType::kFloat32, DType::kFloat64, DType::kInt16, DType::kInt32, DType::kInt64});
        check_same_dtype(n, "start", s.dtype, "limit", input_type(n, 1, "limit").dtype);
        check_same_dtype(n, "start", s.dtype, "delta", input_type(n, 2, "delta").dtype);
        return std::vector<ir::TensorType>{{s.dtype, {range_count(n)}}};
    };
    d.compute = [](const ComputeArgs& a) {
        const DType dt = a.out_dtype();
        Expr start = tensor_elem_imm(*a.constant_input(0), 0, dt), delta = tensor_elem_imm(*a.constant_input(2), 0, dt);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) { return start + te::cast(te::compute_dtype(dt), i[0]) * delta; },
            "Range", dt);
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// The fill tensor of ConstantOfShape (default: f32 zero).
Tensor fill_value(const ir::Node& n) {
    auto it = n.attrs().find("value");
    if (it == n.attrs().end()) {
        Tensor t(DType::kFloat32, {1});
        t.set_f64(0, 0.0);
        return t;
    }
    const Tensor& t = std::get<Tensor>(it->second);
    KILN_CHECK(t.numel() == 1, kInvalidModel)
        << node_label(n) << ": attribute value must hold one element, got shape " << shape_str(t.shape());
    return t;
}

OpDef constant_of_shape_op() {
    OpDef d;
    d.name = "ConstantOfShape";
    d.onnx_versions = {9, 20, 21, 23};
    d.attrs = {{"value", AttrKind::kTensor, std::nullopt}};
    d.value_inputs = {0};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        std::vector<int64_t> shape = constant_ints(n, 0, "input");
        for (int64_t s : shape)
            KILN_CHECK(s >= 0, kInvalidModel) << node_label(n) << ": negative dimension " << s << " in the shape input";
        return std::vector<ir::TensorType>{{fill_value(n).dtype(), to_dims(shape)}};
    };
    d.compute = [](const ComputeArgs& a) {
        Expr v = tensor_elem_imm(fill_value(a.node), 0, a.out_dtype());
        auto out = te::compute(a.out_shape(), [&](const std::vector<Var>&) { return v; }, "ConstantOfShape", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

DType eyelike_dtype(const ir::Node& n, DType input) {
    if (!n.has_attr("dtype")) return input;
    const int64_t code = n.attr_int("dtype", 0);
    std::optional<DType> t = dtype_from_onnx(static_cast<int>(code));
    KILN_CHECK(t.has_value(), kUnsupported) << node_label(n) << ": unsupported dtype code " << code;
    return *t;
}

OpDef eyelike_op() {
    OpDef d;
    d.name = "EyeLike";
    d.onnx_versions = {9, 22};
    d.attrs = {{"dtype", AttrKind::kInt, std::nullopt}, {"k", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_rank(n, "input", x.rank(), 2);
        const DType t = eyelike_dtype(n, x.dtype);
        check_dtype(n, "output", t, all_types());
        return std::vector<ir::TensorType>{{t, x.shape}};
    };
    d.compute = [](const ComputeArgs& a) {
        const int64_t k = a.node.attr_int("k", 0);
        const DType cd = te::compute_dtype(a.out_dtype());
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                return te::select(te::eq(Expr(i[1]) - Expr(i[0]), te::int_imm(k)), te::make_const(cd, 1), te::make_const(cd, 0));
            },
            "EyeLike", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// KilnDimRange (internal; symbolic compiles, compiler::lower_dim_ranges): out[i] = i for i in
// [0, x.shape[axis]), int64. What Range(0, Gather(Shape(x), axis), 1) computes (position ids),
// with its length a dim of x, which may be a symbol, instead of a value computed at run time.
// `limit` (optional): the range stands for the first rows of an axis of that size (a Slice of
// position ids), so the dim may not exceed it; the runtime checks it when it binds the dims.
OpDef dim_range_op() {
    OpDef d;
    d.name = "KilnDimRange";
    d.internal = true;
    d.min_inputs = d.max_inputs = 1;
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt, true}, {"limit", AttrKind::kInt, std::nullopt, false}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "x");
        const int64_t axis = n.attr_int("axis", 0);
        KILN_CHECK(axis >= 0 && axis < x.rank(), kInvalidModel)
            << node_label(n) << ": axis " << axis << " is out of range for x " << x.str();
        return std::vector<ir::TensorType>{{DType::kInt64, {x.shape[static_cast<size_t>(axis)]}}};
    };
    d.compute = [](const ComputeArgs& a) {  // x only lends its dim: its data is never read
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) { return Expr(i[0]); }, "KilnDimRange", DType::kInt64);
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_generator_ops(OpRegistry& r) {
    r.add(range_op());
    r.add(dim_range_op());
    r.add(constant_of_shape_op());
    r.add(eyelike_op());
}

}  // namespace kiln::op
