// partition_loops: a vectorized loop holding select(i < c, ...) splits into one loop per piece,
// whose selects and clamped indices fold away; results equal the formula evaluated here (the
// tir interpreter runs the partitioned function). Loops without cuts, non-vectorized loops and
// loops with more pieces than the limit stay whole.
#include <gtest/gtest.h>

#include <algorithm>

#include "loop_test_util.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/partition_loops.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

using testing::count;
using testing::fill;

// y[r, j] = j < 5 ? a[r, min(j, 4)] : (j < 12 ? b[r, clamp(j - 5)] : -1): a concat of two
// rows and a constant tail along the vectorized axis (three pieces).
TEST(PartitionLoops, ConcatAlongTheVectorAxisSplitsAndFolds) {
    const int64_t rows = 3, na = 5, nb = 7, n = 14;
    te::Tensor a = te::placeholder({rows, na}, DType::kFloat32, "a");
    te::Tensor b = te::placeholder({rows, nb}, DType::kFloat32, "b");
    te::Tensor y = te::compute({rows, n}, [&](const std::vector<te::Var>& i) {
        te::Expr j = i[1];
        te::Expr ja = te::min(j, te::int_imm(na - 1));
        te::Expr jb = te::min(te::max(j - te::int_imm(na), te::int_imm(0)), te::int_imm(nb - 1));
        te::Expr tail = te::select(j < te::int_imm(na + nb), te::read(b, {te::Expr(i[0]), jb}),
                                   te::make_const(DType::kFloat32, -1.0));
        return te::select(j < te::int_imm(na), te::read(a, {te::Expr(i[0]), ja}), tail);
    }, "y");
    te::Schedule s = te::create_schedule({y});
    s[y].vectorize(s[y].axis(1));
    PrimFunc whole = simplify(lower(s, {a, b, y}, "k"));
    PrimFunc f = simplify(partition_loops(whole));
    const std::string before = stmt_str(whole.body), after = stmt_str(f.body);
    EXPECT_EQ(count(before, "vectorized"), 1) << before;
    EXPECT_EQ(count(after, "vectorized"), 3) << after;
    EXPECT_EQ(count(after, "select"), 0) << after;
    EXPECT_EQ(count(after, "min("), 0) << after;

    Tensor ta(DType::kFloat32, {rows, na}), tb(DType::kFloat32, {rows, nb});
    for (int64_t i = 0; i < rows * na; ++i) ta.set_f64(i, fill(i));
    for (int64_t i = 0; i < rows * nb; ++i) tb.set_f64(i, fill(i + 100));
    std::vector<Tensor> args = {ta, tb, Tensor(DType::kFloat32, {rows, n})};
    interpret(f, args);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
            const double want = j < na ? ta.get_f64(r * na + j) : j < na + nb ? tb.get_f64(r * nb + j - na) : -1.0;
            EXPECT_DOUBLE_EQ(args[2].get_f64(r * n + j), want) << r << "," << j;
        }
}

// y[j] = a[clamp(2j - 1)] + a[clamp(2j + 1)]: a stride-2 window's edge taps (separable MaxPool);
// the clamps bind at j = 0 and j = n - 1 only, so three pieces, the middle one clamp-free.
TEST(PartitionLoops, ClampsOfAStridedIndexCutWhereTheyStopBinding) {
    const int64_t w = 15, n = 8;  // 2*7 + 1 = 15 reaches past the last element
    te::Tensor a = te::placeholder({2, w}, DType::kFloat32, "a");
    auto clamp = [&](te::Expr i) { return te::min(te::max(i, te::int_imm(0)), te::int_imm(w - 1)); };
    te::Tensor y = te::compute({2, n}, [&](const std::vector<te::Var>& i) {
        te::Expr j = i[1];
        return te::read(a, {te::Expr(i[0]), clamp(j * 2 - te::int_imm(1))}) +
               te::read(a, {te::Expr(i[0]), clamp(j * 2 + te::int_imm(1))});
    }, "y");
    te::Schedule s = te::create_schedule({y});
    s[y].vectorize(s[y].axis(1));
    PrimFunc f = simplify(partition_loops(simplify(lower(s, {a, y}, "k"))));
    const std::string after = stmt_str(f.body);
    EXPECT_EQ(count(after, "min("), 0) << after;
    EXPECT_EQ(count(after, "max("), 0) << after;

    Tensor ta(DType::kFloat32, {2, w});
    for (int64_t i = 0; i < 2 * w; ++i) ta.set_f64(i, fill(i));
    std::vector<Tensor> args = {ta, Tensor(DType::kFloat32, {2, n})};
    interpret(f, args);
    auto at = [&](int64_t r, int64_t c) { return ta.get_f64(r * w + std::clamp<int64_t>(c, 0, w - 1)); };
    for (int64_t r = 0; r < 2; ++r)
        for (int64_t j = 0; j < n; ++j)
            EXPECT_DOUBLE_EQ(args[1].get_f64(r * n + j), at(r, 2 * j - 1) + at(r, 2 * j + 1)) << r << "," << j;
}

// A Concat along the last axis under a split by the vector length, its boundary a multiple of
// it (YOLO's heads: 1600 of 2000): the simplifier turns `i_o*16 + i_i < 48` into `i_o < 3`, and
// the serial i_o loop around the vectorized one splits there into two select-free loops.
TEST(PartitionLoops, SerialLoopAroundAVectorLoopSplitsAtAnAlignedConcatBoundary) {
    const int64_t rows = 3, na = 48, nb = 32, n = na + nb;
    te::Tensor a = te::placeholder({rows, na}, DType::kFloat32, "a");
    te::Tensor b = te::placeholder({rows, nb}, DType::kFloat32, "b");
    te::Tensor y = te::compute({rows, n}, [&](const std::vector<te::Var>& i) {
        te::Expr j = i[1];
        te::Expr ja = te::min(j, te::int_imm(na - 1));
        te::Expr jb = te::max(j - te::int_imm(na), te::int_imm(0));
        return te::select(j < te::int_imm(na), te::read(a, {te::Expr(i[0]), ja}), te::read(b, {te::Expr(i[0]), jb}));
    }, "y");
    te::Schedule s = te::create_schedule({y});
    auto [jo, ji] = s[y].split(s[y].axis(1), 16);
    s[y].vectorize(ji);
    PrimFunc whole = simplify(lower(s, {a, b, y}, "k"));
    PrimFunc f = simplify(partition_loops(whole));
    const std::string before = stmt_str(whole.body), after = stmt_str(f.body);
    EXPECT_EQ(count(before, "select"), 1) << before;
    EXPECT_EQ(count(after, "select"), 0) << after;
    EXPECT_EQ(count(after, "vectorized"), 2) << after;

    Tensor ta(DType::kFloat32, {rows, na}), tb(DType::kFloat32, {rows, nb});
    for (int64_t i = 0; i < rows * na; ++i) ta.set_f64(i, fill(i));
    for (int64_t i = 0; i < rows * nb; ++i) tb.set_f64(i, fill(i + 100));
    std::vector<Tensor> args = {ta, tb, Tensor(DType::kFloat32, {rows, n})};
    interpret(f, args);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
            const double want = j < na ? ta.get_f64(r * na + j) : tb.get_f64(r * nb + j - na);
            EXPECT_DOUBLE_EQ(args[2].get_f64(r * n + j), want) << r << "," << j;
        }
}

// The same select on a serial loop, and on a vectorized loop with nine pieces, stays whole.
TEST(PartitionLoops, LeavesSerialLoopsAndTooManyPieces) {
    te::Tensor a = te::placeholder({2, 32}, DType::kFloat32, "a");
    auto build = [&](int cuts) {
        return te::compute({2, 32}, [&, cuts](const std::vector<te::Var>& i) {
            te::Expr j = i[1], v = te::read(a, {te::Expr(i[0]), j});
            for (int c = 1; c <= cuts; ++c) v = te::select(j < te::int_imm(3 * c), v * te::make_const(DType::kFloat32, 2.0), v);
            return v;
        }, "y");
    };
    te::Tensor serial = build(1);
    te::Schedule s1 = te::create_schedule({serial});
    PrimFunc f1 = simplify(partition_loops(simplify(lower(s1, {a, serial}, "k"))));
    EXPECT_EQ(count(stmt_str(f1.body), "for "), 2) << stmt_str(f1.body);

    te::Tensor many = build(8);  // cuts 3, 6, ..., 24: nine pieces
    te::Schedule s2 = te::create_schedule({many});
    s2[many].vectorize(s2[many].axis(1));
    PrimFunc f2 = simplify(partition_loops(simplify(lower(s2, {a, many}, "k"))));
    EXPECT_EQ(count(stmt_str(f2.body), "vectorized"), 1) << stmt_str(f2.body);
}

}  // namespace
}  // namespace kiln::tir
