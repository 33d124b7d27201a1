// Comparison, logical, bitwise and modulo ops with numpy broadcasting, plus Where.
//   Equal Less Greater LessOrEqual GreaterOrEqual: bool results (NaN compares false, != true);
//   And Or Xor: bool operands (Xor is !=); BitwiseAnd/Or/Xor/Not: integer dtypes;
//   BitShift: unsigned dtypes, direction LEFT/RIGHT; a shift >= the width gives 0 (numpy);
//   Mod: fmod=1 is C fmod / truncating % (result takes the dividend's sign); fmod=0 (integers
//   only, per spec) is floor modulo (the divisor's sign, like Python); integer modulo by zero
//   gives 0 in compiled kernels;
//   Where: select(cond, X, Y) with three-way broadcasting.
#include "op/broadcast.h"
#include "op/elementwise_util.h"
#include "op/host_broadcast.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::BinaryOp;
using te::Expr;

OpDef bin(const std::string& name, std::vector<int> versions, const std::vector<DType>& types, BinaryOp op,
          std::optional<DType> out = std::nullopt) {
    return binary_map_op(
        name, std::move(versions), types, [op](Expr a, Expr b, const ir::Node&) { return te::binary(op, a, b); }, out);
}

OpDef bitshift_op() {
    OpDef d = binary_map_op("BitShift", {11}, unsigned_types(), [](Expr a, Expr b, const ir::Node& n) {
        const bool left = n.attr_string("direction", "") == "LEFT";
        return te::binary(left ? BinaryOp::kShl : BinaryOp::kShr, a, b);
    });
    d.attrs = {{"direction", AttrKind::kString, std::nullopt, true}};
    const auto base = d.infer;
    d.infer = [base](const ir::Node& n) {
        const std::string dir = n.attr_string("direction", "");
        KILN_CHECK(dir == "LEFT" || dir == "RIGHT", kInvalidModel)
            << node_label(n) << ": attribute direction must be 'LEFT' or 'RIGHT', got '" << dir << "'";
        return base(n);
    };
    return d;
}

OpDef mod_op() {
    OpDef d = binary_map_op("Mod", {10, 13}, numeric_types(), [](Expr a, Expr b, const ir::Node& n) {
        return te::binary(n.attr_int("fmod", 0) ? BinaryOp::kMod : BinaryOp::kFloorMod, a, b);
    });
    d.attrs = {{"fmod", AttrKind::kInt, ir::Attr(int64_t{0})}};
    const auto base = d.infer;
    d.infer = [base](const ir::Node& n) {
        auto out = base(n);
        KILN_CHECK(!(dtype_is_float(out[0].dtype) && n.attr_int("fmod", 0) == 0), kInvalidModel)
            << node_label(n) << ": floating-point Mod requires fmod=1, got fmod=0 for dtype "
            << dtype_name(out[0].dtype);
        return out;
    };
    return d;
}

OpDef where_op() {
    OpDef d;
    d.name = "Where";
    d.onnx_versions = {9, 16};
    d.min_inputs = d.max_inputs = 3;
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const auto& c = input_type(n, 0, "condition");
        const auto& x = input_type(n, 1, "X");
        const auto& y = input_type(n, 2, "Y");
        check_dtype(n, "condition", c.dtype, {DType::kBool});
        check_dtype(n, "X", x.dtype, all_types());
        check_same_dtype(n, "X", x.dtype, "Y", y.dtype);
        return std::vector<ir::TensorType>{{x.dtype, broadcast_shapes(n, {c.shape, x.shape, y.shape})}};
    };
    d.compute = [](const ComputeArgs& a) {  // over symbolic dims too (compiler/symbolic_compile.h)
        auto out = te::sym_compute(
            a.out_dims(),
            [&](const std::vector<te::Var>& i) {
                return te::select(broadcast_read(a.in(0), i), broadcast_read(a.in(1), i), broadcast_read(a.in(2), i));
            },
            "Where", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Equal: the TE compute for numeric and bool operands; string operands (DType::kString) have only
// the host kernel (numpy-broadcast elementwise ==, which the graph interpreter runs). The host
// kernel also takes the other dtypes (floats compared as values: NaN != NaN).
std::vector<Datum> equal_host(const HostArgs& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& y = a.tensor(1);
    KILN_CHECK(x.dtype() == y.dtype(), kInvalidArgument)
        << a.node.describe() << ": expected the same dtype for A and B, got " << dtype_name(x.dtype()) << " and "
        << dtype_name(y.dtype());
    const Shape shape = host_broadcast_shape(a.node, {x.shape(), y.shape()});
    const auto xi = host_broadcast_index(x.shape(), shape);
    const auto yi = host_broadcast_index(y.shape(), shape);
    Tensor out(DType::kBool, shape);
    bool* o = out.data_as<bool>();
    const DType t = x.dtype();
    for (size_t k = 0; k < xi.size(); ++k) {
        if (t == DType::kString) o[k] = x.data_as<std::string>()[xi[k]] == y.data_as<std::string>()[yi[k]];
        else if (dtype_is_float(t)) o[k] = x.get_f64(xi[k]) == y.get_f64(yi[k]);
        else o[k] = x.get_i64(xi[k]) == y.get_i64(yi[k]);
    }
    return {Datum(std::move(out))};
}

OpDef equal_op() {
    OpDef d = bin("Equal", {7, 11, 13, 19}, all_types(), BinaryOp::kEQ, DType::kBool);
    const auto base = d.infer;
    d.infer = [base](const ir::Node& n) {
        const auto& a = input_type(n, 0, "A");
        const auto& b = input_type(n, 1, "B");
        if (a.dtype != DType::kString && b.dtype != DType::kString) return base(n);
        check_same_dtype(n, "A", a.dtype, "B", b.dtype);
        return std::vector<ir::TensorType>{{DType::kBool, broadcast_shapes(n, {a.shape, b.shape})}};
    };
    d.host = equal_host;
    return d;
}

}  // namespace

void register_compare_logic_ops(OpRegistry& r) {
    const DType kBool = DType::kBool;
    r.add(equal_op());
    r.add(bin("Less", {7, 9, 13}, numeric_types(), BinaryOp::kLT, kBool));
    r.add(bin("Greater", {7, 9, 13}, numeric_types(), BinaryOp::kGT, kBool));
    r.add(bin("LessOrEqual", {12, 16}, numeric_types(), BinaryOp::kLE, kBool));
    r.add(bin("GreaterOrEqual", {12, 16}, numeric_types(), BinaryOp::kGE, kBool));
    r.add(bin("And", {7}, {kBool}, BinaryOp::kAnd));
    r.add(bin("Or", {7}, {kBool}, BinaryOp::kOr));
    r.add(bin("Xor", {7}, {kBool}, BinaryOp::kNE));
    r.add(bin("BitwiseAnd", {18}, int_types(), BinaryOp::kBitAnd));
    r.add(bin("BitwiseOr", {18}, int_types(), BinaryOp::kBitOr));
    r.add(bin("BitwiseXor", {18}, int_types(), BinaryOp::kBitXor));
    r.add(unary_map_op("BitwiseNot", {18}, int_types(),
                       [](Expr x, const ir::Node&) { return te::unary(te::UnaryOp::kBitNot, x); }));
    r.add(bitshift_op());
    r.add(mod_op());
    r.add(where_op());
}

}  // namespace kiln::op
