// Cast (to = an ONNX TensorProto data type) and CastLike (the dtype of a second input).
// Semantics are te::cast's (shared with the interpreter and the C emitter): float -> int
// truncates toward zero (NaN -> 0, saturating at the int64 range, then wrapping to the width);
// any -> bool is != 0; f16/bf16 targets round to nearest even from f32 (a f64 source rounds
// through f32 first). string, complex, 4-bit and float8 types are kUnsupported.
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

// TensorProto.DataType -> DType; false for types Kiln has no DType for.
bool to_dtype(int64_t t, DType* out) {
    switch (t) {
        case 1: *out = DType::kFloat32; return true;
        case 2: *out = DType::kUInt8; return true;
        case 3: *out = DType::kInt8; return true;
        case 4: *out = DType::kUInt16; return true;
        case 5: *out = DType::kInt16; return true;
        case 6: *out = DType::kInt32; return true;
        case 7: *out = DType::kInt64; return true;
        case 9: *out = DType::kBool; return true;
        case 10: *out = DType::kFloat16; return true;
        case 11: *out = DType::kFloat64; return true;
        case 12: *out = DType::kUInt32; return true;
        case 13: *out = DType::kUInt64; return true;
        case 16: *out = DType::kBFloat16; return true;
        default: return false;
    }
}

std::vector<te::Tensor> cast_compute(const ComputeArgs& a) {
    const DType to = a.out_dtype();
    te::Tensor x = a.in(0);
    auto out = te::compute(
        a.out_shape(), [&](const std::vector<te::Var>& i) { return te::cast(te::compute_dtype(to), te::read(x, i)); },
        a.node.op(), to);
    return {out};
}

OpDef cast_op() {
    OpDef d;
    d.name = "Cast";
    d.onnx_versions = {1, 6, 9, 13, 19, 21, 23};
    d.attrs = {{"to", AttrKind::kInt, std::nullopt, true}, {"saturate", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, all_types());
        const int64_t to = n.attr_int("to", 0);
        DType t;
        KILN_CHECK(to_dtype(to, &t), kUnsupported)
            << node_label(n) << ": Cast to " << onnx_type_name(to) << " (TensorProto type " << to
            << ") is not supported";
        return std::vector<ir::TensorType>{{t, x.shape}};
    };
    d.compute = cast_compute;
    return d;
}

OpDef castlike_op() {
    OpDef d;
    d.name = "CastLike";
    d.onnx_versions = {15, 19, 21, 23};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"saturate", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        const auto& like = input_type(n, 1, "target_type");
        check_dtype(n, "input", x.dtype, all_types());
        check_dtype(n, "target_type", like.dtype, all_types());
        return std::vector<ir::TensorType>{{like.dtype, x.shape}};
    };
    d.compute = cast_compute;
    return d;
}

}  // namespace

void register_cast_ops(OpRegistry& r) {
    r.add(cast_op());
    r.add(castlike_op());
}

}  // namespace kiln::op
