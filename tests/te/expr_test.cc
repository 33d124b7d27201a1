// te expressions, tensors and schedules: construction, dtype rules, folding, errors.
#include "te/expr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/error.h"
#include "te/schedule.h"
#include "te/tensor.h"

using namespace kiln;
using namespace kiln::te;

namespace {
int64_t ival(const Expr& e) {
    EXPECT_EQ(e->kind, ExprKind::kIntImm) << expr_str(e);
    return e->kind == ExprKind::kIntImm ? static_cast<const IntImmNode&>(*e).value : 0;
}
double fval(const Expr& e) {
    EXPECT_EQ(e->kind, ExprKind::kFloatImm) << expr_str(e);
    return e->kind == ExprKind::kFloatImm ? static_cast<const FloatImmNode&>(*e).value : 0;
}
template <typename F>
void expect_error(ErrorKind kind, F&& f) {
    try {
        f();
        ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
    }
}
}  // namespace

TEST(TeExpr, ConstantFoldingInts) {
    EXPECT_EQ(ival(int_imm(3) + int_imm(4)), 7);
    EXPECT_EQ(ival(int_imm(3) * int_imm(-4)), -12);
    EXPECT_EQ(ival(int_imm(-7) / int_imm(2)), -3);           // truncating
    EXPECT_EQ(ival(floordiv(int_imm(-7), int_imm(2))), -4);  // floor
    EXPECT_EQ(ival(floormod(int_imm(-7), int_imm(2))), 1);
    EXPECT_EQ(ival(binary(BinaryOp::kMod, int_imm(-7), int_imm(2))), -1);  // C %
    EXPECT_EQ(ival(min(int_imm(3), int_imm(-2))), -2);
    EXPECT_EQ(ival(binary(BinaryOp::kPow, int_imm(3), int_imm(4))), 81);
    Expr lt = int_imm(1) < int_imm(2);
    EXPECT_EQ(lt->dtype, DType::kBool);
    EXPECT_EQ(ival(lt), 1);
    // Wrap-around in the dtype's width.
    EXPECT_EQ(ival(int_imm(127, DType::kInt8) + int_imm(1, DType::kInt8)), -128);
    EXPECT_EQ(ival(int_imm(200, DType::kUInt8) + int_imm(100, DType::kUInt8)), 44);
    // Division by zero is not folded (and does not crash).
    Expr d = int_imm(1) / int_imm(0);
    EXPECT_EQ(d->kind, ExprKind::kBinary);
}

TEST(TeExpr, ConstantFoldingFloats) {
    EXPECT_DOUBLE_EQ(fval(float_imm(1.5) + float_imm(2.25)), 3.75);
    // f32 rounding: 0.1f + 0.2f computed as float.
    EXPECT_EQ(fval(float_imm(0.1) + float_imm(0.2)), static_cast<double>(0.1f + 0.2f));
    EXPECT_DOUBLE_EQ(fval(float_imm(2.0, DType::kFloat64) * float_imm(0.1, DType::kFloat64)), 0.2);
    EXPECT_DOUBLE_EQ(fval(unary(UnaryOp::kExp, float_imm(0.0))), 1.0);
    EXPECT_DOUBLE_EQ(fval(unary(UnaryOp::kRound, float_imm(2.5))), 2.0);  // half to even
    EXPECT_DOUBLE_EQ(fval(unary(UnaryOp::kRound, float_imm(3.5))), 4.0);
    EXPECT_EQ(ival(cast(DType::kInt32, float_imm(-2.7))), -2);  // truncation toward zero
    EXPECT_DOUBLE_EQ(fval(cast(DType::kFloat32, int_imm(5))), 5.0);
}

TEST(TeExpr, ConstantFoldingBitwiseShiftsAndNewIntrinsics) {
    EXPECT_EQ(ival(binary(BinaryOp::kBitAnd, int_imm(0b1100), int_imm(0b1010))), 0b1000);
    EXPECT_EQ(ival(binary(BinaryOp::kBitOr, int_imm(0b1100), int_imm(0b1010))), 0b1110);
    EXPECT_EQ(ival(binary(BinaryOp::kBitXor, int_imm(0b1100), int_imm(0b1010))), 0b0110);
    EXPECT_EQ(ival(binary(BinaryOp::kShl, int_imm(1, DType::kUInt8), int_imm(7, DType::kUInt8))), 128);
    EXPECT_EQ(ival(binary(BinaryOp::kShl, int_imm(1, DType::kUInt8), int_imm(8, DType::kUInt8))), 0);  // wraps
    EXPECT_EQ(ival(binary(BinaryOp::kShr, int_imm(255, DType::kUInt8), int_imm(3, DType::kUInt8))), 31);
    EXPECT_EQ(ival(binary(BinaryOp::kShl, int_imm(1, DType::kUInt64), int_imm(64, DType::kUInt64))), 0);
    EXPECT_EQ(ival(binary(BinaryOp::kShr, int_imm(-8), int_imm(1))), -4);  // arithmetic for signed
    EXPECT_EQ(ival(unary(UnaryOp::kBitNot, int_imm(0, DType::kUInt8))), 255);
    EXPECT_EQ(ival(unary(UnaryOp::kBitNot, int_imm(5, DType::kInt32))), -6);
    Expr nan = unary(UnaryOp::kIsNaN, float_imm(NAN));
    EXPECT_EQ(nan->dtype, DType::kBool);
    EXPECT_EQ(ival(nan), 1);
    EXPECT_EQ(ival(unary(UnaryOp::kIsNaN, float_imm(INFINITY))), 0);
    EXPECT_EQ(ival(unary(UnaryOp::kIsNaN, int_imm(3))), 0);
    EXPECT_EQ(unary(UnaryOp::kIsNaN, ex(make_var("x", DType::kFloat32)))->dtype, DType::kBool);
    EXPECT_DOUBLE_EQ(fval(unary(UnaryOp::kAtanh, float_imm(0.5, DType::kFloat64))), 0.5 * std::log(3.0));
    EXPECT_DOUBLE_EQ(fval(unary(UnaryOp::kLog1p, float_imm(0.0, DType::kFloat64))), 0.0);
    EXPECT_EQ(expr_str(binary(BinaryOp::kShl, ex(make_var("x")), int_imm(2))), "shl(x, 2)");
    EXPECT_EQ(expr_str(unary(UnaryOp::kTan, ex(make_var("y", DType::kFloat32)))), "tan(y)");
}

TEST(TeExpr, DtypeRules) {
    Var x = make_var("x", DType::kInt32);
    Expr e = ex(x) + int_imm(1);  // immediate takes x's dtype
    EXPECT_EQ(e->dtype, DType::kInt32);
    Var f = make_var("f", DType::kFloat32);
    EXPECT_EQ((ex(f) * int_imm(2))->dtype, DType::kFloat32);
    EXPECT_EQ((ex(x) * float_imm(0.5))->dtype, DType::kFloat32);  // float immediate promotes
    Var i = make_var("i");
    EXPECT_EQ((ex(i) * 64 + int_imm(3))->dtype, DType::kInt64);
    EXPECT_EQ((ex(x) + ex(i))->dtype, DType::kInt64);  // wider int wins
    EXPECT_EQ((ex(f) + ex(x))->dtype, DType::kFloat32);
    Var d = make_var("d", DType::kFloat64);
    EXPECT_EQ((ex(f) + ex(d))->dtype, DType::kFloat64);
    EXPECT_EQ((ex(f) < ex(d))->dtype, DType::kBool);
    EXPECT_EQ(logical_and(ex(x) < int_imm(3), ex(f) > float_imm(0))->dtype, DType::kBool);
    EXPECT_EQ(compute_dtype(DType::kFloat16), DType::kFloat32);
    EXPECT_EQ(compute_dtype(DType::kBFloat16), DType::kFloat32);
    EXPECT_EQ(compute_dtype(DType::kInt8), DType::kInt8);
}

TEST(TeExpr, ReduceIdentity) {
    EXPECT_EQ(fval(reduce_identity(ReduceOp::kSum, DType::kFloat32)), 0.0);
    EXPECT_EQ(fval(reduce_identity(ReduceOp::kProd, DType::kFloat32)), 1.0);
    EXPECT_EQ(fval(reduce_identity(ReduceOp::kMax, DType::kFloat32)),
              -std::numeric_limits<double>::infinity());
    EXPECT_EQ(fval(reduce_identity(ReduceOp::kMin, DType::kFloat64)),
              std::numeric_limits<double>::infinity());
    EXPECT_EQ(ival(reduce_identity(ReduceOp::kMax, DType::kInt32)),
              std::numeric_limits<int32_t>::min());
    EXPECT_EQ(ival(reduce_identity(ReduceOp::kMin, DType::kInt8)), 127);
    EXPECT_EQ(ival(reduce_identity(ReduceOp::kMax, DType::kInt64)),
              std::numeric_limits<int64_t>::min());
    EXPECT_EQ(static_cast<uint64_t>(ival(reduce_identity(ReduceOp::kMin, DType::kUInt64))),
              std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(reduce_identity(ReduceOp::kMax, DType::kFloat16)->dtype, DType::kFloat32);
}

TEST(TeExpr, Printing) {
    Var x = make_var("x"), y = make_var("y");
    EXPECT_EQ(expr_str((ex(x) + 1) * ex(y)), "(x + 1)*y");
    EXPECT_EQ(expr_str(ex(x) * 64 + ex(y)), "x*64 + y");
    EXPECT_EQ(expr_str(ex(x) - (ex(y) - 1)), "x - (y - 1)");
    EXPECT_EQ(expr_str(floordiv(ex(x), int_imm(4))), "floordiv(x, 4)");
    EXPECT_EQ(expr_str(unary(UnaryOp::kExp, ex(x))), "exp(x)");
    Tensor a = placeholder({4, 5}, DType::kFloat32, "A");
    EXPECT_EQ(expr_str(read(a, {ex(x), ex(y)})), "A[x, y]");
}

TEST(TeTensor, ComputeAndInputs) {
    Tensor a = placeholder({4, 5}, DType::kFloat32, "A");
    Tensor b = placeholder({5}, DType::kFloat32, "B");
    Tensor c = compute(
        {4, 5}, [&](const std::vector<Var>& i) { return read(a, i) + read(b, {ex(i[1])}); }, "C");
    EXPECT_FALSE(c->is_placeholder);
    ASSERT_EQ(c->axis.size(), 2u);
    EXPECT_EQ(c->axis[1]->extent, 5);
    EXPECT_EQ(c->dtype, DType::kFloat32);
    auto ins = c->inputs();
    ASSERT_EQ(ins.size(), 2u);
    EXPECT_EQ(ins[0], a);
    EXPECT_EQ(ins[1], b);
    auto order = post_order({c});
    ASSERT_EQ(order.size(), 3u);
    EXPECT_EQ(order.back(), c);
    // f16 storage: reads are f32, body is f32.
    Tensor h = placeholder({3}, DType::kFloat16, "H");
    Tensor h2 = compute(
        {3}, [&](const std::vector<Var>& i) { return read(h, i) * float_imm(2.0); }, "H2",
        DType::kFloat16);
    EXPECT_EQ(read(h, {int_imm(0)})->dtype, DType::kFloat32);
    EXPECT_EQ(h2->body->dtype, DType::kFloat32);
    EXPECT_EQ(h2->dtype, DType::kFloat16);
    // Requested dtype converts the body.
    Tensor ci = compute(
        {3}, [&](const std::vector<Var>& i) { return read(h, i); }, "CI", DType::kInt32);
    EXPECT_EQ(ci->body->dtype, DType::kInt32);
}

TEST(TeTensor, RankZero) {
    Tensor s = placeholder({}, DType::kFloat32, "S");
    Tensor t = compute(
        {}, [&](const std::vector<Var>& i) { return read(s, std::vector<Expr>{}) + float_imm(1); },
        "T");
    EXPECT_EQ(t->ndim(), 0);
    EXPECT_EQ(t->numel(), 1);
    EXPECT_TRUE(t->axis.empty());
}

TEST(TeTensor, Errors) {
    Tensor a = placeholder({4, 5}, DType::kFloat32, "A");
    expect_error(ErrorKind::kInvalidArgument, [&] { read(a, {int_imm(0)}); });
    expect_error(ErrorKind::kInvalidArgument, [&] { placeholder({-1}, DType::kFloat32, "bad"); });
    IterVar r = reduce_axis(5, "r");
    // A reduction nested inside an expression is rejected.
    expect_error(ErrorKind::kInvalidArgument, [&] {
        compute(
            {4},
            [&](const std::vector<Var>& i) {
                return sum(read(a, {ex(i[0]), ex(r->var)}), {r}) + float_imm(1);
            },
            "bad");
    });
    // sum over a data-parallel axis is rejected.
    IterVar dp = make_iter_var("d", 5);
    expect_error(ErrorKind::kInvalidArgument, [&] { sum(float_imm(1), {dp}); });
}

TEST(TeSchedule, LeavesAndPrimitives) {
    Tensor a = placeholder({10, 7}, DType::kFloat32, "A");
    IterVar r = reduce_axis(7, "r");
    Tensor c = compute(
        {10},
        [&](const std::vector<Var>& i) {
            return sum(read(a, {ex(i[0]), ex(r->var)}), {r});
        },
        "C");
    Schedule s = create_schedule({c});
    Stage& st = s[c];
    ASSERT_EQ(st.leaf_iter_vars().size(), 2u);
    EXPECT_EQ(st.leaf_iter_vars()[0], st.axis(0));
    EXPECT_EQ(st.leaf_iter_vars()[1], st.reduce_axis(0));
    auto [o, i] = st.split(st.axis(0), 4);
    EXPECT_EQ(o->extent, 3);  // ceil(10/4)
    EXPECT_EQ(i->extent, 4);
    EXPECT_EQ(st.leaf_iter_vars().size(), 3u);
    st.reorder({st.reduce_axis(0), o});
    EXPECT_EQ(st.leaf_iter_vars()[0], st.reduce_axis(0));
    EXPECT_EQ(st.leaf_iter_vars()[1], i);
    EXPECT_EQ(st.leaf_iter_vars()[2], o);
    st.vectorize(i);
    EXPECT_EQ(st.loop_kind(i), LoopKind::kVectorized);
    EXPECT_EQ(st.loop_kind(o), LoopKind::kSerial);
    IterVar f = st.fuse(i, o);
    EXPECT_EQ(f->extent, 12);
    EXPECT_EQ(st.leaf_iter_vars().size(), 2u);
    auto [po, pi] = st.split_nparts(f, 5);
    EXPECT_EQ(po->extent, 4);  // factor ceil(12/5)=3 -> 4 parts
    EXPECT_EQ(pi->extent, 3);
}

TEST(TeSchedule, Errors) {
    Tensor a = placeholder({8, 8}, DType::kFloat32, "A");
    Tensor b = compute(
        {8, 8}, [&](const std::vector<Var>& i) { return read(a, i) * float_imm(2); }, "B");
    IterVar r = reduce_axis(8, "r");
    Tensor c = compute(
        {8},
        [&](const std::vector<Var>& i) {
            return sum(read(b, {ex(i[0]), ex(r->var)}), {r});
        },
        "C");
    Tensor d = compute(
        {8}, [&](const std::vector<Var>& i) { return read(c, i) + float_imm(1); }, "D");
    Schedule s = create_schedule({d});
    Stage& sb = s[b];
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.split(sb.axis(0), 0); });
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.split(sb.axis(0), -3); });
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.split_nparts(sb.axis(0), 0); });
    auto [o, i] = sb.split(sb.axis(0), 4);
    // The parent is no longer a leaf.
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.split(sb.axis(0), 2); });
    // Non-adjacent fuse (o, i, axis1): o and axis1 are not adjacent.
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.fuse(o, sb.axis(1)); });
    // Wrong order.
    expect_error(ErrorKind::kInvalidArgument, [&] { sb.fuse(i, o); });
    // Inline a reduction / an output.
    expect_error(ErrorKind::kInvalidArgument, [&] { s[c].compute_inline(); });
    expect_error(ErrorKind::kInvalidArgument, [&] { s[d].compute_inline(); });
    // Parallel / vectorized reduce axis.
    expect_error(ErrorKind::kInvalidArgument, [&] { s[c].parallel(s[c].reduce_axis(0)); });
    expect_error(ErrorKind::kInvalidArgument, [&] { s[c].vectorize(s[c].reduce_axis(0)); });
    // Fusing a data-parallel axis with a reduce axis.
    expect_error(ErrorKind::kInvalidArgument,
                 [&] { s[c].fuse(s[c].axis(0), s[c].reduce_axis(0)); });
    // Stage of a placeholder.
    expect_error(ErrorKind::kInvalidArgument, [&] { s[a]; });
    sb.compute_inline();
    EXPECT_TRUE(sb.is_inlined());
}
