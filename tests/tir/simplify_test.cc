// Simplifier: unit rewrites, statement cleanup, and a property test that simplify() never
// changes interpreter results on random integer index programs (negative values included).
#include "tir/simplify.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "te/expr.h"
#include "tir/interpreter.h"

using namespace kiln;
using te::Expr;
using te::Var;

TEST(Simplify, Identities) {
    Var x = te::make_var("x");
    Expr ex = x;
    EXPECT_EQ(tir::simplify(ex * 1), ex);
    EXPECT_EQ(tir::simplify(ex + 0), ex);
    EXPECT_EQ(tir::simplify(ex - 0), ex);
    EXPECT_EQ(te::expr_str(tir::simplify(ex * 0)), "0");
    EXPECT_EQ(te::expr_str(tir::simplify((ex + 2) + 3)), "x + 5");
    EXPECT_EQ(te::expr_str(tir::simplify((ex - 2) + 3)), "x + 1");
    EXPECT_EQ(te::expr_str(tir::simplify((ex * 2) * 3)), "x*6");
    EXPECT_EQ(te::expr_str(tir::simplify(te::int_imm(2) + ex)), "x + 2");
    EXPECT_EQ(te::expr_str(tir::simplify(te::min(te::int_imm(3), te::int_imm(9)))), "3");
    EXPECT_EQ(te::expr_str(tir::simplify(te::floordiv(ex, te::int_imm(1)))), "x");
    // Without range knowledge, floordiv/floormod of a var stay.
    EXPECT_EQ(te::expr_str(tir::simplify(te::floordiv(ex, te::int_imm(4)))), "floordiv(x, 4)");
    EXPECT_EQ(te::expr_str(tir::simplify(te::floormod(ex, te::int_imm(4)))), "floormod(x, 4)");
    // floor semantics make multiples of the divisor separable for any sign.
    Var y = te::make_var("y");
    EXPECT_EQ(te::expr_str(tir::simplify(te::floordiv(te::ex(y) * 8 + ex, te::int_imm(4)))),
              "y*2 + floordiv(x, 4)");
    EXPECT_EQ(te::expr_str(tir::simplify(te::floormod(te::ex(y) * 8 + ex, te::int_imm(4)))),
              "floormod(x, 4)");
    // Float: x*1 folds, x*0 does not (NaN/inf).
    Var f = te::make_var("f", DType::kFloat32);
    EXPECT_EQ(tir::simplify(te::ex(f) * te::float_imm(1.0)), te::ex(f));
    EXPECT_EQ(te::expr_str(tir::simplify(te::ex(f) * te::float_imm(0.0))), "f*0.0");
}

TEST(Simplify, LoopsAndIfs) {
    te::Buffer b = te::make_buffer("B", DType::kInt64, {8, 4});
    Var i = te::make_var("i"), j = te::make_var("j");
    // for i in 0..1 { B[i*4 + 2] = i } -> B[2] = 0
    tir::Stmt s1 = tir::make_for(i, te::int_imm(1), te::LoopKind::kSerial,
                                 tir::make_store(b, te::ex(i) * 4 + 2, te::ex(i)));
    EXPECT_EQ(tir::stmt_str(tir::simplify(s1)), "B[2] = 0\n");
    // for i in 0..8 { for j in 0..4 { if (i*4 + j < 32) store; if (i >= 8) store2 } }
    Expr idx = te::ex(i) * 4 + te::ex(j);
    tir::Stmt inner = tir::make_seq(
        {tir::make_if(idx < te::int_imm(32), tir::make_store(b, idx, te::int_imm(1))),
         tir::make_if(te::ex(i) >= te::int_imm(8), tir::make_store(b, idx, te::int_imm(2))),
         tir::make_if(te::ex(i) < te::int_imm(4), tir::make_store(b, idx, te::int_imm(3)))});
    tir::Stmt s2 = tir::make_for(i, te::int_imm(8), te::LoopKind::kSerial,
                                 tir::make_for(j, te::int_imm(4), te::LoopKind::kSerial, inner));
    std::string out = tir::stmt_str(tir::simplify(s2));
    EXPECT_EQ(out.find("< 32"), std::string::npos) << out;        // provably true: removed
    EXPECT_EQ(out.find("= 2"), std::string::npos) << out;         // provably false: removed
    EXPECT_NE(out.find("if (i < 4)"), std::string::npos) << out;  // unknown: kept
    // Range-based floordiv / floormod.
    Expr q = te::floordiv(te::ex(j), te::int_imm(4)), r = te::floormod(te::ex(j), te::int_imm(4));
    tir::Stmt s3 =
        tir::make_for(j, te::int_imm(4), te::LoopKind::kSerial,
                      tir::make_store(b, q + r, te::floordiv(te::ex(j) + 4, te::int_imm(4))));
    EXPECT_EQ(tir::stmt_str(tir::simplify(s3)), "for j in 0..4 {\n  B[j] = 1\n}\n");
    // Zero-extent loop disappears.
    tir::PrimFunc f{"z", {b}, tir::make_for(i, te::int_imm(0), te::LoopKind::kSerial, s1)};
    tir::PrimFunc fz = tir::simplify(f);
    ASSERT_EQ(fz.body->kind, tir::StmtKind::kSeq);
}

namespace {
// Random int64 expression over loop vars (values may be negative).
Expr random_int_expr(std::mt19937& rng, const std::vector<Var>& vars, int depth) {
    auto leaf = [&]() -> Expr {
        if (rng() % 3 == 0) return te::int_imm(static_cast<int64_t>(rng() % 13) - 6);
        return vars[rng() % vars.size()];
    };
    if (depth == 0) return leaf();
    Expr a = random_int_expr(rng, vars, depth - 1);
    int64_t c = static_cast<int64_t>(rng() % 9) - 4;
    if (c == 0) c = 3;
    switch (rng() % 10) {
        case 0: return a + random_int_expr(rng, vars, depth - 1);
        case 1: return a - random_int_expr(rng, vars, depth - 1);
        case 2: return a * te::int_imm(c);
        case 3: return te::floordiv(a, te::int_imm(c));
        case 4: return te::floormod(a, te::int_imm(c));
        case 5: return te::min(a, random_int_expr(rng, vars, depth - 1));
        case 6: return te::max(a, te::int_imm(c));
        case 7: return te::select(a < random_int_expr(rng, vars, depth - 1), a, te::int_imm(c));
        case 8: return a + te::int_imm(c);
        default: return te::binary(te::BinaryOp::kMod, a, te::int_imm(c));
    }
}
}  // namespace

TEST(Simplify, PropertyNeverChangesResults) {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 300; ++trial) {
        int64_t e0 = 1 + rng() % 6, e1 = 1 + rng() % 6;
        Var i = te::make_var("i"), j = te::make_var("j");
        te::Buffer out = te::make_buffer("O", DType::kInt64, {e0 * e1 * 2});
        Expr v = random_int_expr(rng, {i, j}, 1 + static_cast<int>(rng() % 4));
        Expr v2 = random_int_expr(rng, {i, j}, 1 + static_cast<int>(rng() % 4));
        Expr idx = te::ex(i) * (e1 * 2) + te::ex(j) * 2;
        tir::Stmt body =
            tir::make_seq({tir::make_store(out, idx, v),
                           tir::make_if(v2 < te::int_imm(2), tir::make_store(out, idx + 1, v2),
                                        tir::make_store(out, idx + 1, te::int_imm(-99)))});
        tir::PrimFunc f{
            "p",
            {out},
            tir::make_for(i, te::int_imm(e0), te::LoopKind::kSerial,
                          tir::make_for(j, te::int_imm(e1), te::LoopKind::kSerial, body))};
        tir::PrimFunc fs = tir::simplify(f);
        std::vector<kiln::Tensor> a = {kiln::Tensor(DType::kInt64, {e0 * e1 * 2})};
        std::vector<kiln::Tensor> b = {kiln::Tensor(DType::kInt64, {e0 * e1 * 2})};
        tir::interpret(f, a);
        tir::interpret(fs, b);
        for (int64_t k = 0; k < e0 * e1 * 2; ++k) {
            ASSERT_EQ(a[0].data_as<int64_t>()[k], b[0].data_as<int64_t>()[k])
                << "trial " << trial << " k " << k << "\nbefore:\n"
                << tir::func_str(f) << "after:\n"
                << tir::func_str(fs);
        }
    }
}
