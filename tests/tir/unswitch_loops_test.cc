// unswitch_loops: a parallel loop whose body selects between inputs on the loop's own variable
// (a channel Concat fused with a per-channel epilogue) becomes one copy of the body per input,
// with no select left; the result equals the formula evaluated here (the tir interpreter runs
// the unswitched function). A condition on an inner loop's variable stays a select.
#include <gtest/gtest.h>

#include "loop_test_util.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"
#include "tir/unswitch_loops.h"

namespace kiln::tir {
namespace {

using testing::count;
using testing::fill;

// y[c, w] = relu(concat(a, b, d)[c, w] * 2 + 1) over channels c (a: 2, b: 3, d: 1 channels),
// the channel loop parallel, w vectorized inside it.
TEST(UnswitchLoops, ChannelConcatBecomesOneCopyPerInput) {
    const int64_t na = 2, nb = 3, nd = 1, c = na + nb + nd, w = 8;
    te::Tensor a = te::placeholder({na, w}, DType::kFloat32, "a");
    te::Tensor b = te::placeholder({nb, w}, DType::kFloat32, "b");
    te::Tensor d = te::placeholder({nd, w}, DType::kFloat32, "d");
    te::Tensor y = te::compute({c, w}, [&](const std::vector<te::Var>& i) {
        te::Expr ch = i[0], x = i[1];
        te::Expr ca = te::min(ch, te::int_imm(na - 1));
        te::Expr cb = te::min(te::max(ch - te::int_imm(na), te::int_imm(0)), te::int_imm(nb - 1));
        te::Expr cd = te::max(ch - te::int_imm(na + nb), te::int_imm(0));
        te::Expr v = te::select(ch < te::int_imm(na), te::read(a, {ca, x}),
                                te::select(ch < te::int_imm(na + nb), te::read(b, {cb, x}), te::read(d, {cd, x})));
        return te::max(v * te::make_const(DType::kFloat32, 2.0) + te::make_const(DType::kFloat32, 1.0),
                       te::make_const(DType::kFloat32, 0.0));
    }, "y");
    te::Schedule s = te::create_schedule({y});
    s[y].parallel(s[y].axis(0));
    s[y].vectorize(s[y].axis(1));
    PrimFunc whole = simplify(lower(s, {a, b, d, y}, "k"));
    PrimFunc f = simplify(unswitch_loops(whole));
    const std::string before = stmt_str(whole.body), after = stmt_str(f.body);
    EXPECT_EQ(count(before, "select"), 2) << before;
    EXPECT_EQ(count(after, "select"), 0) << after;
    EXPECT_EQ(count(after, "vectorized"), 3) << after;  // one inner loop per input

    Tensor ta(DType::kFloat32, {na, w}), tb(DType::kFloat32, {nb, w}), td(DType::kFloat32, {nd, w});
    for (int64_t i = 0; i < na * w; ++i) ta.set_f64(i, fill(i));
    for (int64_t i = 0; i < nb * w; ++i) tb.set_f64(i, fill(i + 50));
    for (int64_t i = 0; i < nd * w; ++i) td.set_f64(i, fill(i + 90));
    std::vector<Tensor> args = {ta, tb, td, Tensor(DType::kFloat32, {c, w})};
    interpret(f, args);
    for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t x = 0; x < w; ++x) {
            const double v = ch < na ? ta.get_f64(ch * w + x)
                                     : ch < na + nb ? tb.get_f64((ch - na) * w + x) : td.get_f64((ch - na - nb) * w + x);
            EXPECT_DOUBLE_EQ(args[3].get_f64(ch * w + x), std::max(v * 2 + 1, 0.0)) << ch << "," << x;
        }
}

TEST(UnswitchLoops, ConditionsOnInnerVariablesStaySelects) {
    const int64_t rows = 4, w = 8;
    te::Tensor a = te::placeholder({rows, w}, DType::kFloat32, "a");
    te::Tensor y = te::compute({rows, w}, [&](const std::vector<te::Var>& i) {
        te::Expr x = i[1];
        return te::select(x < te::int_imm(3), te::read(a, {te::Expr(i[0]), x}), te::make_const(DType::kFloat32, 0.0));
    }, "y");
    te::Schedule s = te::create_schedule({y});
    s[y].parallel(s[y].axis(0));
    PrimFunc whole = simplify(lower(s, {a, y}, "k"));
    PrimFunc f = unswitch_loops(whole);
    EXPECT_EQ(stmt_str(f.body), stmt_str(whole.body));
}

}  // namespace
}  // namespace kiln::tir
