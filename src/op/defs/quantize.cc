// The linear quantization family:
//   QuantizeLinear       y = saturate(rint(x / scale) + zero_point)      (rint: half to even)
//   DequantizeLinear     y = (x - zero_point) * scale
//   DynamicQuantizeLinear  u8 quantization of x with scale / zero point from x's range
//   (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv: qlinear.cc)
//
// Scale / zero point granularity (Q/DQ): per tensor (a scalar or one element), per axis (1-D of
// x.shape[axis]) or blocked (x's shape with ceil(x.shape[axis] / block_size) along axis); a
// parameter is read at the output index with that axis mapped (i, i[axis], i[axis] / block).
//
// Precision, matching the spec's reference: the division x / scale runs in f32 (f64 when x or
// scale is int32, or precision=double); f16/bf16 scales compute in f32. Dequantization runs in
// f32 for 8/16-bit inputs (exact), in f64 for int32 inputs or an f64 output. (qlinear.cc gives
// the QLinear* precision.)
//
// Low-precision float outputs (f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f4e2m1): the f32
// quotient is stored with the dtype's round-to-nearest-even conversion; f8 types ignore the zero
// point and clamp to +-max finite when saturate=1; f4e2m1 adds the zero point (as the reference
// does). i4 / u4 saturate to [-8, 7] / [0, 15] like the other integer types.
//
// DynamicQuantizeLinear: min / max reduction stages over all of x, then (ONNX formulas, the
// range extended to include 0): scale = (max - min) / 255 (1 when max == min, as ONNX Runtime),
// zp = rint(clamp(-min / scale, 0, 255)), y = clamp(rint(x / scale) + zp, 0, 255).
#include <cmath>
#include <string>

#include "op/defs/linear_util.h"
#include "op/defs/movement_util.h"
#include "op/defs/quantize_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

bool quant_range(DType t, double* lo, double* hi) {
    switch (t) {
        case DType::kInt8:
            *lo = -128, *hi = 127;
            return true;
        case DType::kUInt8:
            *lo = 0, *hi = 255;
            return true;
        case DType::kInt16:
            *lo = -32768, *hi = 32767;
            return true;
        case DType::kUInt16:
            *lo = 0, *hi = 65535;
            return true;
        case DType::kInt4:
            *lo = -8, *hi = 7;
            return true;
        case DType::kUInt4:
            *lo = 0, *hi = 15;
            return true;
        default:
            return false;
    }
}

bool is_quant_float(DType t) { return dtype_is_lowp_float(t) && t != DType::kFloat8E8M0; }

void check_quant_type(const ir::Node& n, const char* what, DType t, bool allow_float) {
    double lo, hi;
    KILN_CHECK(quant_range(t, &lo, &hi) || (allow_float && is_quant_float(t)), kUnsupported)
        << node_label(n) << ": op " << n.op() << " does not support quantized dtype "
        << dtype_name(t) << " (" << what << "); supported: i8 u8 i16 u16 i4 u4"
        << (allow_float ? " f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f4e2m1" : "");
}

te::Expr saturate_round(te::Expr v, te::Expr zp, DType t, bool zp_first) {
    double lo, hi;
    quant_range(t, &lo, &hi);
    const DType c = v->dtype;
    if (zp && zp_first) v = v + te::cast(c, zp);
    v = te::unary(te::UnaryOp::kRound, v);
    if (zp && !zp_first) v = v + te::cast(c, zp);
    v = te::min(te::max(v, te::make_const(c, lo)), te::make_const(c, hi));
    return te::cast(te::compute_dtype(t), v);
}

bool is_single_element(const ir::TensorType& t) {
    return t.rank() == 0 || (t.rank() == 1 && t.shape[0].is_static() && t.shape[0].value == 1);
}

namespace {

using te::Expr;
using te::Var;

std::vector<Expr> exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

// ---- scale / zero-point granularity ----

struct QuantLayout {
    enum Kind { kTensor, kAxis, kBlocked } kind = kTensor;
    int axis = 0;
    int64_t block = 0;
};

QuantLayout quant_layout(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& s,
                         const char* sname) {
    QuantLayout l;
    const int64_t block = n.attr_int("block_size", 0);
    KILN_CHECK(block >= 0, kInvalidModel)
        << node_label(n) << ": block_size must be >= 0, got " << block;
    if (is_single_element(s) && block == 0) return l;
    KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": " << sname << " of shape "
                                             << dims_str(s.shape) << " needs an input of rank >= 1";
    l.axis = normalize_axis(n, n.attr_int("axis", 1), x.rank());
    if (block == 0) {
        KILN_CHECK(s.rank() == 1 && s.shape[0] == x.shape[l.axis], kInvalidModel)
            << node_label(n) << ": per-axis " << sname << " must have shape ["
            << x.shape[l.axis].str() << "] (input dim " << l.axis << "), got " << dims_str(s.shape);
        l.kind = QuantLayout::kAxis;
        return l;
    }
    l.kind = QuantLayout::kBlocked;
    l.block = block;
    bool ok = s.rank() == x.rank();
    for (int d = 0; ok && d < x.rank(); ++d) {
        if (d != l.axis) {
            ok = s.shape[d] == x.shape[d];
        } else {
            const int64_t xd = static_dim(n, x.shape[d], "x");
            ok = s.shape[d] == ir::Dim((xd + block - 1) / block);
        }
    }
    KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": blocked " << sname
                                  << " must have the input's shape " << dims_str(x.shape)
                                  << " with ceil(dim / " << block << ") along axis " << l.axis
                                  << ", got " << dims_str(s.shape);
    return l;
}

// The zero point must have the scale's shape (one element each counts as the same).
void check_zero_point_shape(const ir::Node& n, const ir::TensorType& s, const ir::TensorType& zp) {
    KILN_CHECK(zp.shape == s.shape || (is_single_element(zp) && is_single_element(s)),
               kInvalidModel)
        << node_label(n) << ": zero point shape " << dims_str(zp.shape)
        << " differs from scale shape " << dims_str(s.shape);
}

Expr read_param(const te::Tensor& p, const QuantLayout& l, const std::vector<Expr>& i) {
    switch (l.kind) {
        case QuantLayout::kTensor:
            return read_scalar(p);
        case QuantLayout::kAxis:
            return te::read(p, {i[l.axis]});
        case QuantLayout::kBlocked: {
            std::vector<Expr> idx = i;
            idx[l.axis] = te::floordiv(i[l.axis], te::int_imm(l.block));
            return te::read(p, idx);
        }
    }
    return nullptr;
}

ir::TensorType static_type(const te::Tensor& t) {
    return ir::TensorType::of_static(t->dtype, t->shape);
}

// ---- QuantizeLinear ----

// The f32 value stored into float type t (the store rounds to nearest even): f8 types ignore the
// zero point (the spec requires it to be 0) and, with saturate, clamp to +-max finite (NaN kept);
// f4e2m1 adds the zero point and always saturates (its store conversion does).
Expr to_quant_float(Expr q, const Expr& zp, DType t, bool saturate) {
    const DType f = DType::kFloat32;
    q = te::cast(f, q);
    if (t == DType::kFloat4E2M1) return zp ? q + te::cast(f, zp) : q;
    if (!saturate) return q;
    Expr hi = te::make_const(f, lowp_max_finite(t)), lo = te::make_const(f, -lowp_max_finite(t));
    return te::select(q > hi, hi, te::select(q < lo, lo, q));
}

const std::vector<DType>& quantize_in_types() {
    static const std::vector<DType> t = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                                         DType::kInt32};
    return t;
}

DType quantize_out_dtype(const ir::Node& n) {
    const int64_t code = n.attr_int("output_dtype", 0);
    std::optional<DType> attr;
    if (code != 0) {
        attr = dtype_from_onnx(static_cast<int>(code));
        KILN_CHECK(attr.has_value(), kUnsupported)
            << node_label(n) << ": op " << n.op() << " does not support output_dtype " << code
            << " (ONNX type code)";
    }
    DType out = attr.value_or(DType::kUInt8);
    if (has_input(n, 2)) {
        const DType zp = n.input(2)->type().dtype;
        KILN_CHECK(!attr || *attr == zp, kInvalidModel)
            << node_label(n) << ": output_dtype " << dtype_name(*attr)
            << " differs from y_zero_point dtype " << dtype_name(zp);
        out = zp;
    }
    return out;
}

// The dtype x / scale is evaluated in.
DType division_dtype(const ir::Node& n, DType x, DType s) {
    const int64_t precision = n.attr_int("precision", 0);
    if (precision != 0) {
        std::optional<DType> p = dtype_from_onnx(static_cast<int>(precision));
        KILN_CHECK(p && (*p == DType::kFloat32 || *p == DType::kFloat64), kUnsupported)
            << node_label(n) << ": op " << n.op()
            << " supports precision float or double, got ONNX type " << precision;
        return *p;
    }
    return x == DType::kInt32 || s == DType::kInt32 ? DType::kFloat64 : DType::kFloat32;
}

std::vector<ir::TensorType> quantize_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "x");
    const auto& s = input_type(n, 1, "y_scale");
    check_dtype(n, "x", x.dtype, quantize_in_types());
    check_dtype(n, "y_scale", s.dtype, quantize_in_types());
    const DType out = quantize_out_dtype(n);
    check_quant_type(n, "y", out, true);
    quant_layout(n, x, s, "y_scale");
    if (has_input(n, 2)) check_zero_point_shape(n, s, n.input(2)->type());
    division_dtype(n, x.dtype, s.dtype);
    return {{out, x.shape}};
}

std::vector<te::Tensor> quantize_compute(const ComputeArgs& a) {
    te::Tensor x = a.in(0), s = a.in(1);
    te::Tensor zp = a.has_input(2) ? a.in(2) : nullptr;
    const QuantLayout l = quant_layout(a.node, static_type(x), static_type(s), "y_scale");
    const DType div = division_dtype(a.node, x->dtype, s->dtype);
    const DType out = a.out_dtype();
    const bool saturate = a.node.attr_int("saturate", 1) != 0;
    return {te::compute(
        a.out_shape(),
        [&](const std::vector<Var>& iv) {
            const std::vector<Expr> i = exprs(iv);
            Expr q = te::cast(div, te::read(x, i)) / te::cast(div, read_param(s, l, i));
            Expr z = zp ? read_param(zp, l, i) : nullptr;
            return is_quant_float(out) ? to_quant_float(q, z, out, saturate)
                                       : saturate_round(q, z, out);
        },
        "QuantizeLinear", out)};
}

// ---- DequantizeLinear ----

const std::vector<DType>& dequantize_in_types() {
    static const std::vector<DType> t = {
        DType::kInt8,           DType::kUInt8,      DType::kInt16,          DType::kUInt16,
        DType::kInt32,          DType::kInt4,       DType::kUInt4,          DType::kFloat8E4M3FN,
        DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1};
    return t;
}

std::vector<ir::TensorType> dequantize_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "x");
    const auto& s = input_type(n, 1, "x_scale");
    check_dtype(n, "x", x.dtype, dequantize_in_types());
    check_dtype(n, "x_scale", s.dtype, float_types());
    quant_layout(n, x, s, "x_scale");
    if (has_input(n, 2)) {
        const auto& zp = n.input(2)->type();
        check_same_dtype(n, "x", x.dtype, "x_zero_point", zp.dtype);
        check_zero_point_shape(n, s, zp);
    }
    DType out = s.dtype;
    if (const int64_t code = n.attr_int("output_dtype", 0); code != 0) {
        std::optional<DType> t = dtype_from_onnx(static_cast<int>(code));
        KILN_CHECK(t && dtype_is_float(*t), kInvalidModel)
            << node_label(n) << ": output_dtype must be a float type, got ONNX type " << code;
        out = *t;
    }
    return {{out, x.shape}};
}

std::vector<te::Tensor> dequantize_compute(const ComputeArgs& a) {
    te::Tensor x = a.in(0), s = a.in(1);
    te::Tensor zp = a.has_input(2) ? a.in(2) : nullptr;
    const QuantLayout l = quant_layout(a.node, static_type(x), static_type(s), "x_scale");
    const bool wide = x->dtype == DType::kInt32;
    // The output type sets the multiplication's precision (f16/bf16 compute in f32).
    const DType c = wide || a.out_dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    return {te::compute(
        a.out_shape(),
        [&](const std::vector<Var>& iv) {
            const std::vector<Expr> i = exprs(iv);
            Expr v;
            if (is_quant_float(x->dtype)) {  // float quantized values: the zero point is 0 by spec
                v = te::read(x, i);
            } else if (wide) {  // int32 - int32 can overflow int32: subtract in int64
                v = te::cast(DType::kInt64, te::read(x, i));
                if (zp) v = v - te::cast(DType::kInt64, read_param(zp, l, i));
                v = te::cast(c, v);
            } else {
                v = te::cast(c, te::read(x, i));
                if (zp) v = v - te::cast(c, read_param(zp, l, i));
            }
            return v * te::cast(c, read_param(s, l, i));
        },
        "DequantizeLinear", a.out_dtype())};
}

OpDef qdq_op(const std::string& name, bool quantize) {
    OpDef d;
    d.name = name;
    d.onnx_versions = {10, 13, 19, 21, 23, 24};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"block_size", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"output_dtype", AttrKind::kInt, ir::Attr(int64_t{0})}};
    if (quantize) {
        d.attrs.push_back({"saturate", AttrKind::kInt, ir::Attr(int64_t{1})});
        d.attrs.push_back({"precision", AttrKind::kInt, ir::Attr(int64_t{0})});
    }
    d.infer = quantize ? quantize_infer : dequantize_infer;
    d.pattern = OpPattern::kInjective;
    d.compute = quantize ? quantize_compute : dequantize_compute;
    return d;
}

// ---- DynamicQuantizeLinear ----

OpDef dynamic_quantize_op() {
    OpDef d;
    d.name = "DynamicQuantizeLinear";
    d.onnx_versions = {11};
    d.min_inputs = d.max_inputs = 1;
    d.min_outputs = d.max_outputs = 3;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "x");
        check_dtype(n, "x", x.dtype, {DType::kFloat32});
        return std::vector<ir::TensorType>{
            {DType::kUInt8, x.shape}, {DType::kFloat32, {}}, {DType::kUInt8, {}}};
    };
    d.pattern = OpPattern::kOpaque;
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        auto extreme = [&](bool is_max) {
            std::vector<te::IterVar> axes;
            std::vector<Expr> idx;
            for (int64_t e : x->shape) {
                axes.push_back(te::reduce_axis(e, "r" + std::to_string(axes.size())));
                idx.push_back(axes.back()->var);
            }
            return te::compute(
                {},
                [&](const std::vector<Var>&) {
                    Expr v = te::read(x, idx);
                    if (axes.empty()) return v;
                    return is_max ? te::max_reduce(v, axes) : te::min_reduce(v, axes);
                },
                is_max ? "dql_max" : "dql_min", DType::kFloat32);
        };
        te::Tensor mn = extreme(false), mx = extreme(true);
        const DType f = DType::kFloat32;
        // The same scalar formulas in each consumer stage (cheap; keeps outputs independent).
        auto scale = [&]() {
            Expr hi = te::max(read_scalar(mx), te::make_const(f, 0));
            Expr lo = te::min(read_scalar(mn), te::make_const(f, 0));
            return te::select(te::eq(hi, lo), te::make_const(f, 1),
                              (hi - lo) / te::make_const(f, 255));
        };
        auto zero_point = [&](const Expr& sc) {
            Expr lo = te::min(read_scalar(mn), te::make_const(f, 0));
            Expr z = te::make_const(f, 0) - lo / sc;
            z = te::min(te::max(z, te::make_const(f, 0)), te::make_const(f, 255));
            return te::unary(te::UnaryOp::kRound, z);
        };
        te::Tensor y = te::compute(
            x->shape,
            [&](const std::vector<Var>& i) {
                Expr sc = scale();
                return saturate_round(te::read(x, i) / sc, zero_point(sc), DType::kUInt8);
            },
            "DynamicQuantizeLinear", DType::kUInt8);
        te::Tensor ys = te::compute(
            {}, [&](const std::vector<Var>&) { return scale(); }, "dql_scale", f);
        te::Tensor yz = te::compute(
            {},
            [&](const std::vector<Var>&) { return te::cast(DType::kUInt8, zero_point(scale())); },
            "dql_zero_point", DType::kUInt8);
        return std::vector<te::Tensor>{y, ys, yz};
    };
    return d;
}

}  // namespace

void register_quantize_ops(OpRegistry& r) {
    r.add(qdq_op("QuantizeLinear", true));
    r.add(qdq_op("DequantizeLinear", false));
    r.add(dynamic_quantize_op());
    register_qlinear_ops(r);
}

}  // namespace kiln::op
