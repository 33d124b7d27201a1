// The integer and quantized linear ops, on the Conv / MatMul accumulation cores (linear_util.h):
//   MatMulInteger  Y = (A - a_zp) @ (B - b_zp)                          int32
//   ConvInteger    Y = conv(x - x_zp, w - w_zp)                         int32
//   QLinearMatMul  y = saturate(rint(acc * m + y_zp)), acc = the MatMulInteger sum,
//                  m = a_scale * b_scale / y_scale
//   QLinearConv    y = saturate(rint((acc + B) * m + y_zp)), acc = the ConvInteger sum,
//                  m = x_scale * w_scale / y_scale
// The zero-point subtraction is folded into the operand reads (int32); zero points and scales
// are per tensor (one element) or per row of A / per column of B (MatMul ops) / per output
// channel of W (Conv ops). Conv's zero padding of (x - x_zp) equals padding x with x_zp.
//
// Precision (as the ONNX reference computes, numpy promotion): m is evaluated in the scale dtype
// with a storage rounding after each operation (stages "qlinear_scale" = a_scale * b_scale and
// "qlinear_multiplier" = that / y_scale, one element per distinct scale pair, so f16 scales round
// like f16 arithmetic); acc * m + y_zp runs in f64, then rounds half to even and saturates.
// Saturation follows the spec and ONNX Runtime; the ONNX reference wraps instead, so the node
// tests test_qlinearmatmul_{2D,3D}_int8_* (whose data overflow int8) fail here as in ORT.
#include <string>

#include "op/defs/linear_util.h"
#include "op/defs/movement_util.h"
#include "op/defs/quantize_util.h"
#include "op/op_util.h"
#include "op/window.h"
#include "support/error.h"

namespace kiln::op {

namespace {

// Multiply-adds x 2 of the integer products (counted as the float ops they replace, so that the
// profile's GFLOP/s column reads int8 throughput in the same units: GOP/s).
double integer_conv_ops(const ir::Node& n, size_t weight_input) {
    const Shape w = n.input(weight_input)->type().static_shape();
    double per_out = 1;
    for (size_t i = 1; i < w.size(); ++i) per_out *= static_cast<double>(w[i]);
    return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * per_out;
}

double integer_matmul_ops(const ir::Node& n) {
    const Shape a = n.input(0)->type().static_shape();
    const double k = a.empty() ? 1.0 : static_cast<double>(a.back());
    return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * k;
}


using te::Expr;
using te::Var;

const std::vector<DType>& q8_types() {
    static const std::vector<DType> t = {DType::kInt8, DType::kUInt8};
    return t;
}

// A per-tensor (one element) or per-`axis_name` (1-D of `len`) parameter; returns true for the
// latter. `len` may be absent (rank too small): then only one element is allowed.
bool param_layout(const ir::Node& n, size_t i, const char* what, const ir::Dim* len,
                  const char* axis_name) {
    const auto& t = input_type(n, i, what);
    if (is_single_element(t)) return false;
    KILN_CHECK(len != nullptr && t.rank() == 1 && t.shape[0] == *len, kInvalidModel)
        << node_label(n) << ": " << what << " must have one element or shape ["
        << (len ? len->str() : "?") << "] (one per " << axis_name << "), got " << dims_str(t.shape);
    return true;
}

// An optional zero point of `dtype` (input i): its layout, or false when omitted.
bool zero_point_layout(const ir::Node& n, size_t i, const char* what, DType dtype,
                       const ir::Dim* len, const char* axis_name) {
    if (!has_input(n, i)) return false;
    check_same_dtype(n, what, n.input(i)->type().dtype, "its operand", dtype);
    return param_layout(n, i, what, len, axis_name);
}

// int32(t[idx]) - int32(zp[idx[pos]] or zp[0]) (pos < 0 counts from the end: -1 is the last
// index); zp may be null (then no subtraction).
ElemReader shifted_reader(const te::Tensor& t, const te::Tensor& zp, bool per_elem, int pos) {
    return [=](const std::vector<Expr>& idx) {
        Expr v = te::cast(DType::kInt32, te::read(t, idx));
        if (!zp) return v;
        const size_t at =
            pos >= 0 ? static_cast<size_t>(pos) : idx.size() - static_cast<size_t>(-pos);
        Expr z = per_elem ? te::read(zp, {idx[at]}) : read_scalar(zp);
        return v - te::cast(DType::kInt32, z);
    };
}

int64_t numel_of(const te::Tensor& t) { return t->numel(); }

// The requantization multiplier m[r, c] = s1[r] * s2[c] / s3 in the scale dtype (each operation
// rounded to it through a stage's storage), shape [numel(s1), numel(s2)].
te::Tensor multiplier(const te::Tensor& s1, const te::Tensor& s2, const te::Tensor& s3) {
    const DType st = s1->dtype;
    auto at = [](const te::Tensor& s, const Var& i) {
        return s->numel() == 1 ? read_scalar(s) : te::read(s, {Expr(i)});
    };
    te::Tensor prod = te::compute(
        {numel_of(s1), numel_of(s2)},
        [&](const std::vector<Var>& i) { return at(s1, i[0]) * at(s2, i[1]); }, "qlinear_scale",
        st);
    return te::compute(
        prod->shape, [&](const std::vector<Var>& i) { return te::read(prod, i) / read_scalar(s3); },
        "qlinear_multiplier", st);
}

// saturate(rint(f64(acc) * f64(m[r or 0, c or 0]) + y_zp)) into y_zp's dtype.
Expr requantize(const Expr& acc, const te::Tensor& m, const Expr& r, const Expr& c,
                const te::Tensor& yzp) {
    Expr mr = m->shape[0] == 1 ? te::int_imm(0) : r;
    Expr mc = m->shape[1] == 1 ? te::int_imm(0) : c;
    Expr v = te::cast(DType::kFloat64, acc) * te::cast(DType::kFloat64, te::read(m, {mr, mc}));
    return saturate_round(v, te::cast(DType::kFloat64, read_scalar(yzp)), yzp->dtype, true);
}

void check_scales(const ir::Node& n, std::initializer_list<size_t> idx) {
    const std::vector<DType>& fl = float_types();
    const DType first = input_type(n, *idx.begin(), "scale").dtype;
    for (size_t i : idx) {
        const DType t = input_type(n, i, "scale").dtype;
        check_dtype(n, "scale", t, {fl[0], fl[2], fl[3]});  // f32 f16 bf16
        check_same_dtype(n, "first scale", first, "scale", t);
    }
}

// ---- MatMulInteger / QLinearMatMul ----

// (A row count dim, B column count dim) when the operand ranks have them.
const ir::Dim* row_dim(const ir::TensorType& a) {
    return a.rank() >= 2 ? &a.shape[a.rank() - 2] : nullptr;
}
const ir::Dim* col_dim(const ir::TensorType& b) {
    return b.rank() >= 2 ? &b.shape[b.rank() - 1] : nullptr;
}

OpDef matmul_integer_op() {
    OpDef d;
    d.name = "MatMulInteger";
    d.onnx_versions = {10};
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& a = input_type(n, 0, "A");
        const auto& b = input_type(n, 1, "B");
        check_dtype(n, "A", a.dtype, q8_types());
        check_dtype(n, "B", b.dtype, q8_types());
        zero_point_layout(n, 2, "a_zero_point", a.dtype, row_dim(a), "row of A");
        zero_point_layout(n, 3, "b_zero_point", b.dtype, col_dim(b), "column of B");
        return std::vector<ir::TensorType>{{DType::kInt32, matmul_output_dims(n, a, b)}};
    };
    d.compute = [](const ComputeArgs& args) {
        const ir::Node& n = args.node;
        const auto& a = n.input(0)->type();
        const auto& b = n.input(1)->type();
        const bool pa = zero_point_layout(n, 2, "a_zero_point", a.dtype, row_dim(a), "row of A");
        const bool pb = zero_point_layout(n, 3, "b_zero_point", b.dtype, col_dim(b), "column of B");
        te::Tensor za = args.has_input(2) ? args.in(2) : nullptr,
                   zb = args.has_input(3) ? args.in(3) : nullptr;
        return std::vector<te::Tensor>{matmul_accumulate(
            args.in(0), args.in(1), args.out_shape(), DType::kInt32, "MatMulInteger",
            shifted_reader(args.in(0), za, pa, -2), shifted_reader(args.in(1), zb, pb, -1))};
    };
    d.schedule = schedule_matmul_stages;
    d.flops = integer_matmul_ops;
    return d;
}

OpDef qlinear_matmul_op() {
    OpDef d;
    d.name = "QLinearMatMul";
    d.onnx_versions = {10, 21};
    d.min_inputs = d.max_inputs = 8;
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& a = input_type(n, 0, "a");
        const auto& b = input_type(n, 3, "b");
        check_dtype(n, "a", a.dtype, q8_types());
        check_dtype(n, "b", b.dtype, q8_types());
        check_scales(n, {1, 4, 6});
        param_layout(n, 1, "a_scale", row_dim(a), "row of a");
        param_layout(n, 4, "b_scale", col_dim(b), "column of b");
        param_layout(n, 6, "y_scale", nullptr, "");
        zero_point_layout(n, 2, "a_zero_point", a.dtype, row_dim(a), "row of a");
        zero_point_layout(n, 5, "b_zero_point", b.dtype, col_dim(b), "column of b");
        const DType y = input_type(n, 7, "y_zero_point").dtype;
        check_dtype(n, "y_zero_point", y, q8_types());
        param_layout(n, 7, "y_zero_point", nullptr, "");
        return std::vector<ir::TensorType>{{y, matmul_output_dims(n, a, b)}};
    };
    d.compute = [](const ComputeArgs& args) {
        const ir::Node& n = args.node;
        const auto& a = n.input(0)->type();
        const auto& b = n.input(3)->type();
        const bool pa = zero_point_layout(n, 2, "a_zero_point", a.dtype, row_dim(a), "row of a");
        const bool pb = zero_point_layout(n, 5, "b_zero_point", b.dtype, col_dim(b), "column of b");
        const Shape out = args.out_shape();
        te::Tensor acc =
            matmul_accumulate(args.in(0), args.in(3), out, DType::kInt32, "qlinear_matmul_acc",
                              shifted_reader(args.in(0), args.in(2), pa, -2),
                              shifted_reader(args.in(3), args.in(5), pb, -1));
        te::Tensor m = multiplier(args.in(1), args.in(4), args.in(6));
        const bool has_rows = a.rank() >= 2, has_cols = b.rank() >= 2;
        te::Tensor y = te::compute(
            out,
            [&](const std::vector<Var>& i) {
                const size_t r = out.size();
                Expr row = has_rows ? Expr(i[r - 1 - (has_cols ? 1 : 0)]) : te::int_imm(0);
                Expr col = has_cols ? Expr(i[r - 1]) : te::int_imm(0);
                return requantize(te::read(acc, i), m, row, col, args.in(7));
            },
            "QLinearMatMul", args.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.schedule = schedule_matmul_stages;
    d.flops = integer_matmul_ops;
    return d;
}

// ---- ConvInteger / QLinearConv ----

std::vector<AttrSpec> conv_attrs() {
    return conv_window_attrs(true);
}

const ir::Dim* out_channels(const ir::TensorType& w) {
    return w.rank() >= 1 ? &w.shape[0] : nullptr;
}

OpDef conv_integer_op() {
    OpDef d;
    d.name = "ConvInteger";
    d.onnx_versions = {10};
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.attrs = conv_attrs();
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "x");
        const auto& w = input_type(n, 1, "w");
        check_dtype(n, "x", x.dtype, q8_types());
        check_dtype(n, "w", w.dtype, q8_types());
        zero_point_layout(n, 2, "x_zero_point", x.dtype, nullptr, "");
        zero_point_layout(n, 3, "w_zero_point", w.dtype, out_channels(w), "output channel");
        return std::vector<ir::TensorType>{{DType::kInt32, conv_output_dims(n, x, w)}};
    };
    d.compute = [](const ComputeArgs& args) {
        const ir::Node& n = args.node;
        const bool pw = zero_point_layout(n, 3, "w_zero_point", n.input(1)->type().dtype,
                                          out_channels(n.input(1)->type()), "output channel");
        te::Tensor zx = args.has_input(2) ? args.in(2) : nullptr,
                   zw = args.has_input(3) ? args.in(3) : nullptr;
        return std::vector<te::Tensor>{conv_accumulate(
            n, args.in(0), args.in(1), args.out_shape(), DType::kInt32, "ConvInteger",
            shifted_reader(args.in(0), zx, false, 0), shifted_reader(args.in(1), zw, pw, 0))};
    };
    d.schedule = schedule_conv_stages;
    d.flops = [](const ir::Node& n) { return integer_conv_ops(n, 1); };
    return d;
}

OpDef qlinear_conv_op() {
    OpDef d;
    d.name = "QLinearConv";
    d.onnx_versions = {10};
    d.min_inputs = 8;
    d.max_inputs = 9;
    d.attrs = conv_attrs();
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "x");
        const auto& w = input_type(n, 3, "w");
        check_dtype(n, "x", x.dtype, q8_types());
        check_dtype(n, "w", w.dtype, q8_types());
        check_scales(n, {1, 4, 6});
        param_layout(n, 1, "x_scale", nullptr, "");
        param_layout(n, 4, "w_scale", out_channels(w), "output channel");
        param_layout(n, 6, "y_scale", nullptr, "");
        zero_point_layout(n, 2, "x_zero_point", x.dtype, nullptr, "");
        zero_point_layout(n, 5, "w_zero_point", w.dtype, out_channels(w), "output channel");
        const DType y = input_type(n, 7, "y_zero_point").dtype;
        check_dtype(n, "y_zero_point", y, q8_types());
        param_layout(n, 7, "y_zero_point", nullptr, "");
        std::vector<ir::Dim> out = conv_output_dims(n, x, w);
        if (has_input(n, 8)) {
            const auto& b = n.input(8)->type();
            check_dtype(n, "B", b.dtype, {DType::kInt32});
            KILN_CHECK(b.rank() == 1 && b.shape[0] == out[1], kInvalidModel)
                << node_label(n) << ": bias B must have shape [" << out[1].str() << "], got "
                << dims_str(b.shape);
        }
        return std::vector<ir::TensorType>{{y, out}};
    };
    d.compute = [](const ComputeArgs& args) {
        const ir::Node& n = args.node;
        const auto& w = n.input(3)->type();
        const bool pw =
            zero_point_layout(n, 5, "w_zero_point", w.dtype, out_channels(w), "output channel");
        te::Tensor acc =
            conv_accumulate(n, args.in(0), args.in(3), args.out_shape(), DType::kInt32,
                            "qlinear_conv_acc", shifted_reader(args.in(0), args.in(2), false, 0),
                            shifted_reader(args.in(3), args.in(5), pw, 0));
        te::Tensor m = multiplier(args.in(1), args.in(4), args.in(6));
        te::Tensor bias = args.has_input(8) ? args.in(8) : nullptr;
        te::Tensor y = te::compute(
            args.out_shape(),
            [&](const std::vector<Var>& i) {
                Expr v = te::read(acc, i);
                if (bias) v = v + te::read(bias, {Expr(i[1])});
                return requantize(v, m, te::int_imm(0), i[1], args.in(7));
            },
            "QLinearConv", args.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    d.schedule = schedule_conv_stages;
    d.flops = [](const ir::Node& n) { return integer_conv_ops(n, 3); };
    return d;
}

}  // namespace

void register_qlinear_ops(OpRegistry& r) {
    r.add(matmul_integer_op());
    r.add(conv_integer_op());
    r.add(qlinear_matmul_op());
    r.add(qlinear_conv_op());
}

}  // namespace kiln::op
