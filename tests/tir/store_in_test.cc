// Stage::store_in: a reduction written straight into the output buffer that its elementwise
// epilogue then updates in place gives the same values as with its own buffer, and allocates
// nothing. Reference: the formula evaluated in the test.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

TEST(StoreIn, ReductionEpilogueInPlaceMatchesTheFormula) {
    te::Tensor a = te::placeholder({4, 8}, DType::kFloat32, "a");
    te::IterVar k = te::reduce_axis(8, "k");
    te::Tensor r = te::compute({4}, [&](const std::vector<te::Var>& i) {
        return te::sum(te::read(a, {te::Expr(i[0]), te::Expr(k->var)}), {k});
    }, "r");
    te::Tensor o = te::compute({4}, [&](const std::vector<te::Var>& i) {
        te::Expr v = te::read(r, i);
        return te::binary(te::BinaryOp::kMax, v, te::make_const(DType::kFloat32, 0)) * v;
    }, "o");
    Tensor in(DType::kFloat32, {4, 8});
    for (int64_t i = 0; i < 32; ++i) in.set_f64(i, static_cast<double>((i * 7) % 11) - 5.0);
    for (bool alias : {false, true}) {
        te::Schedule s = te::create_schedule({o});
        if (alias) s[r].store_in(o);
        PrimFunc f = simplify(lower(s, {a, o}, "k"));
        EXPECT_EQ(stmt_str(f.body).find("allocate") == std::string::npos &&
                      stmt_str(f.body).find("Allocate") == std::string::npos,
                  alias)
            << stmt_str(f.body);
        std::vector<Tensor> args = {in, Tensor(DType::kFloat32, {4})};
        interpret(f, args);
        for (int64_t i = 0; i < 4; ++i) {
            double sum = 0;
            for (int64_t j = 0; j < 8; ++j) sum += in.get_f64(i * 8 + j);
            EXPECT_DOUBLE_EQ(args[1].get_f64(i), std::max(sum, 0.0) * sum) << "row " << i << " alias " << alias;
        }
    }
}

TEST(StoreIn, RejectsAMismatchedTarget) {
    te::Tensor a = te::placeholder({4}, DType::kFloat32, "a");
    te::Tensor r = te::compute({4}, [&](const std::vector<te::Var>& i) { return te::read(a, i); }, "r");
    te::Tensor o = te::compute({2, 2}, [&](const std::vector<te::Var>& i) {
        return te::read(r, {te::Expr(i[0]) * te::int_imm(2) + te::Expr(i[1])});
    }, "o");
    te::Schedule s = te::create_schedule({o});
    EXPECT_THROW(s[r].store_in(o), Error);
}

}  // namespace
}  // namespace kiln::tir
