// Symbolic dims in te: tensors and iter vars over dim Vars, the static special case, schedule
// primitives on symbolic extents, evaluation of dim expressions and the errors.
#include "te/dims.h"

#include <gtest/gtest.h>

#include <limits>

#include "support/error.h"
#include "te/schedule.h"
#include "te/tensor.h"

using namespace kiln;
using namespace kiln::te;

namespace {
template <typename F>
void expect_error(F&& f, const std::string& substring) {
    try {
        f();
        ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
    }
}
}  // namespace

TEST(SymbolicDims, PlaceholderKeepsExpressionsAndStaticSentinel) {
    Var n = make_dim("n");
    Tensor x = sym_placeholder({n * int_imm(2), int_imm(384)}, DType::kFloat32, "X");
    EXPECT_FALSE(x->is_static());
    EXPECT_EQ(x->shape, (std::vector<int64_t>{kDynamicDim, 384}));
    ASSERT_EQ(x->sym_shape.size(), 2u);
    EXPECT_EQ(expr_str(x->shape_exprs()[0]), "n*2");
    EXPECT_EQ(eval_dim(x->shape_exprs()[0], {{n.get(), 21}}), 42);
    EXPECT_EQ(eval_dim(x->shape_exprs()[1], {}), 384);
}

TEST(SymbolicDims, ConstantDimsGiveTheStaticTensor) {
    Tensor x = sym_placeholder({int_imm(3), int_imm(4) * int_imm(2)}, DType::kFloat32, "X");
    EXPECT_TRUE(x->is_static());
    EXPECT_EQ(x->shape, (std::vector<int64_t>{3, 8}));
    EXPECT_EQ(x->numel(), 24);
    Tensor y = sym_compute({int_imm(3), int_imm(8)}, [&](const std::vector<Var>& i) { return read(x, i); }, "Y");
    EXPECT_TRUE(y->is_static());
    EXPECT_TRUE(y->axis[1]->is_static());
    EXPECT_EQ(y->axis[1]->extent, 8);
}

TEST(SymbolicDims, ComputeAxesAndReduceAxisCarryExtents) {
    Var n = make_dim("n"), m = make_dim("m");
    Tensor x = sym_placeholder({n, m}, DType::kFloat32, "X");
    IterVar r = reduce_axis(Expr(m), "r");
    EXPECT_FALSE(r->is_static());
    EXPECT_EQ(r->extent, kDynamicDim);
    Tensor s = sym_compute({n}, [&](const std::vector<Var>& i) { return sum(read(x, {ex(i[0]), ex(r->var)}), {r}); }, "S");
    EXPECT_FALSE(s->axis[0]->is_static());
    EXPECT_EQ(s->axis[0]->sym_extent.get(), static_cast<const ExprNode*>(n.get()));
    EXPECT_NE(expr_str(s->body).find("r in 0..m"), std::string::npos) << expr_str(s->body);
}

TEST(SymbolicDims, SplitAndFuseOfSymbolicExtents) {
    Var n = make_dim("n");
    Tensor x = sym_placeholder({n, int_imm(10)}, DType::kFloat32, "X");
    Tensor y = sym_compute({n, int_imm(10)}, [&](const std::vector<Var>& i) { return read(x, i); }, "Y");
    Schedule s = create_schedule({y});
    Stage& st = s[y];
    auto [o, i] = st.split(st.axis(0), 64);  // a symbolic extent keeps the factor
    EXPECT_TRUE(i->is_static());
    EXPECT_EQ(i->extent, 64);
    for (int64_t v : {0, 1, 63, 64, 65, 1000})
        EXPECT_EQ(eval_dim(o->extent_expr(), {{n.get(), v}}), (v + 63) / 64) << v;
    IterVar f = st.fuse(i, st.axis(1));
    EXPECT_EQ(f->extent, 640);
    IterVar g = st.fuse(o, f);
    EXPECT_FALSE(g->is_static());
    EXPECT_EQ(eval_dim(g->extent_expr(), {{n.get(), 65}}), 2 * 640);
    expect_error([&] { st.split_nparts(g, 4); }, "static extent");
}

TEST(SymbolicDims, StoreInComparesDimExpressions) {
    Var n = make_dim("n"), m = make_dim("m");
    Tensor x = sym_placeholder({n}, DType::kFloat32, "X");
    Tensor a = sym_compute({n}, [&](const std::vector<Var>& i) { return read(x, i); }, "A");
    Tensor b = sym_compute({n}, [&](const std::vector<Var>& i) { return read(a, i); }, "B");
    Tensor c = sym_compute({m}, [&](const std::vector<Var>& i) { return float_imm(1); }, "C");
    Schedule s = create_schedule({b, c});
    s[a].store_in(b);  // same dims: fine
    EXPECT_EQ(s[a].storage(), b);
    Schedule s2 = create_schedule({b, c});
    expect_error([&] { s2[a].store_in(c); }, "same shape");  // both kDynamicDim, different Vars
}

TEST(SymbolicDims, EvalChecksOverflowDivisionAndUnboundVars) {
    Var n = make_dim("n"), m = make_dim("m");
    const int64_t big = std::numeric_limits<int64_t>::max() / 2 + 1;
    expect_error([&] { eval_dim(n * m, {{n.get(), big}, {m.get(), 2}}); }, "overflows");
    expect_error([&] { eval_dim(floordiv(n, m), {{n.get(), 4}, {m.get(), 0}}); }, "division by zero");
    expect_error([&] { eval_dim(n + int_imm(1), {}); }, "'n' has no value");
    EXPECT_EQ(eval_dim(floordiv(n + int_imm(15), int_imm(16)), {{n.get(), 17}}), 2);
    EXPECT_EQ(eval_dim(floormod(n, int_imm(16)), {{n.get(), 17}}), 1);
    EXPECT_EQ(eval_dim(te::min(Expr(n), Expr(m)), {{n.get(), 3}, {m.get(), 9}}), 3);
}

TEST(SymbolicDims, BadDimExpressionsAreErrors) {
    Var n = make_dim("n");
    expect_error([&] { sym_placeholder({int_imm(-2)}, DType::kFloat32, "X"); }, "negative dimension -2");
    expect_error([&] { sym_placeholder({float_imm(2.0)}, DType::kFloat32, "X"); }, "integer expression");
    expect_error([&] { sym_placeholder({Expr(n) < int_imm(3)}, DType::kFloat32, "X"); }, "integer expression");
    Tensor x = sym_placeholder({n}, DType::kFloat32, "X");
    expect_error([&] { sym_placeholder({read(x, {int_imm(0)})}, DType::kFloat32, "Y"); }, "placeholder 'Y'");
    expect_error([&] { reduce_axis(float_imm(1.5), "r"); }, "iter var 'r'");
}

TEST(SymbolicDims, CollectAndCompare) {
    Var n = make_dim("n"), m = make_dim("m");
    std::vector<Var> vars;
    collect_dim_vars(n * m + n, vars);
    collect_dim_vars(m, vars);
    ASSERT_EQ(vars.size(), 2u);
    EXPECT_EQ(vars[0], n);
    EXPECT_EQ(vars[1], m);
    EXPECT_TRUE(same_dim(n * int_imm(2), n * int_imm(2)));
    EXPECT_FALSE(same_dim(n * int_imm(2), m * int_imm(2)));
    EXPECT_FALSE(same_dim(Expr(make_dim("n")), Expr(n)));  // identity, not name
    EXPECT_EQ(expr_str(dims_product({n, int_imm(3)})), "n*3");
}
