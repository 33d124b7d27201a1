// Cast (to = an ONNX TensorProto data type) and CastLike (the dtype of a second input).
// Semantics are te::cast's (shared with the interpreter and the C emitter): float -> int
// truncates toward zero (NaN -> 0, saturating at the int64 range, then wrapping to the width:
// i4/u4 included); any -> bool is != 0; f16/bf16 targets round to nearest even from f32 (a f64
// source rounds through f32 first).
// Low-precision targets (support/dtype.h): the f32 value is stored with the non-saturating
// storage conversion (round to nearest even); saturate=1 (the default, Cast-19+) first clamps it
// to +-max finite (NaN passes), which is exactly ONNX's clip-then-convert. saturate only affects
// the float8 targets (f4e2m1 always saturates) and f8e8m0 (clamped to 2^127). f8e8m0 supports
// round_mode="up" (Cast-24's default); "nearest"/"down" are kUnsupported. A f64 source rounds
// through f32 before a f8/f4 target (double rounding: the suite only casts f32/f16 to them).
// string and complex types are kUnsupported.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const char* onnx_type_name(int64_t t) {
    static const char* kNames[] = {"UNDEFINED", "FLOAT",        "UINT8",          "INT8",       "UINT16",
                                   "INT16",     "INT32",        "INT64",          "STRING",     "BOOL",
                                   "FLOAT16",   "DOUBLE",       "UINT32",         "UINT64",     "COMPLEX64",
                                   "COMPLEX128", "BFLOAT16",    "FLOAT8E4M3FN",   "FLOAT8E4M3FNUZ",
                                   "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",       "INT4",       "FLOAT4E2M1",
                                   "FLOAT8E8M0"};
    return t >= 0 && t < static_cast<int64_t>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[t] : "unknown";
}

// Every numeric type Cast accepts: all_types() plus the low-precision ones.
const std::vector<DType>& cast_types() {
    static const std::vector<DType> v = [] {
        std::vector<DType> t = all_types();
        for (DType d : {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ,
                         DType::kFloat8E8M0, DType::kInt4, DType::kUInt4, DType::kFloat4E2M1})
            t.push_back(d);
        return t;
    }();
    return v;
}

// Checks the low-precision attributes against the target dtype.
void check_lowp_attrs(const ir::Node& n, DType to) {
    if (to != DType::kFloat8E8M0) return;
    const std::string mode = n.attr_string("round_mode", "up");
    KILN_CHECK(mode == "up", kUnsupported) << node_label(n) << ": " << n.op() << " to f8e8m0 with round_mode '"
                                           << mode << "' is not supported (only 'up')";
}

std::vector<te::Tensor> cast_compute(const ComputeArgs& a) {
    const DType to = a.out_dtype();
    te::Tensor x = a.in(0);
    // f4e2m1's storage conversion saturates by itself; the f8 types (e8m0 too) clamp here.
    const bool do_clamp = a.node.attr_int("saturate", 1) != 0 && dtype_is_lowp_float(to) && to != DType::kFloat4E2M1;
    const double mx = do_clamp ? static_cast<double>(lowp_max_finite(to)) : 0.0;
    auto out = te::sym_compute(
        a.out_dims(),
        [&](const std::vector<te::Var>& i) {
            te::Expr v = te::cast(te::compute_dtype(to), te::read(x, i));
            if (!do_clamp) return v;
            te::Expr hi = te::make_const(DType::kFloat32, mx), lo = te::make_const(DType::kFloat32, -mx);
            // Comparisons with NaN are false: NaN passes through to the storage conversion.
            return te::select(v > hi, hi, te::select(v < lo, lo, v));
        },
        a.node.op(), to);
    return {out};
}

OpDef cast_op() {
    OpDef d;
    d.name = "Cast";
    d.onnx_versions = {1, 6, 9, 13, 19, 21, 23, 24};
    d.attrs = {{"to", AttrKind::kInt, std::nullopt, true},
               {"saturate", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"round_mode", AttrKind::kString, ir::Attr(std::string("up"))}};
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, cast_types());
        const int64_t to = n.attr_int("to", 0);
        std::optional<DType> t = to > 0 && to <= 1000 ? dtype_from_onnx(static_cast<int>(to)) : std::nullopt;
        KILN_CHECK(t.has_value(), kUnsupported)
            << node_label(n) << ": Cast to " << onnx_type_name(to) << " (TensorProto type " << to
            << ") is not supported";
        check_lowp_attrs(n, *t);
        return std::vector<ir::TensorType>{{*t, x.shape}};
    };
    d.compute = cast_compute;
    return d;
}

OpDef castlike_op() {
    OpDef d;
    d.name = "CastLike";
    d.onnx_versions = {15, 19, 21, 23, 24};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"saturate", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"round_mode", AttrKind::kString, ir::Attr(std::string("up"))}};
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        const auto& like = input_type(n, 1, "target_type");
        check_dtype(n, "input", x.dtype, cast_types());
        check_dtype(n, "target_type", like.dtype, cast_types());
        check_lowp_attrs(n, like.dtype);
        return std::vector<ir::TensorType>{{like.dtype, x.shape}};
    };
    d.compute = cast_compute;
    return d;
}


// Gradients (op/gradient.h): a float -> float cast passes g back cast to the input's dtype; a
// cast to or from an integer type is not differentiable (autodiff never asks: such values stop
// a path).
std::vector<ir::Value*> cast_grad(GradientBuilder& b) {
    std::vector<ir::Value*> out(b.num_inputs(), nullptr);
    const DType from = b.input(0)->type().dtype;
    if (!dtype_is_float(from) || !dtype_is_float(b.output(0)->type().dtype)) return out;
    ir::Value* g = b.output_grad_or_zeros(0);
    out[0] = g->type().dtype == from ? g : b.emit1("Cast", {g}, {{"to", int64_t{dtype_to_onnx(from)}}});
    return out;
}

}  // namespace

void register_cast_ops(OpRegistry& r) {
    OpDef cast = cast_op();
    cast.gradient = cast_grad;
    r.add(std::move(cast));
    OpDef castlike = castlike_op();
    castlike.gradient = cast_grad;
    r.add(std::move(castlike));
}

}  // namespace kiln::op
