// drop_tile_guards: a register tile's accumulation over a zero-padded packed operand loses its
// tail guard and gives the same values; a guard that protects a reduction (padding lanes would
// reach real ones) or a read past a buffer's end stays. Reference: the formula evaluated here.
#include <gtest/gtest.h>

#include "te/schedule.h"
#include "tir/drop_tile_guards.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

int count_ifs(const std::string& s) {
    int n = 0;
    for (size_t p = s.find("if ("); p != std::string::npos; p = s.find("if (", p + 1)) ++n;
    return n;
}

double fill(int64_t i) { return static_cast<double>((i * 7) % 13) - 6.0; }

// C[0, i, j] = sum_k A[i, k] * Bp[j / 16, k, j % 16] with N = 20 columns in two blocks of 16 (the
// second padded with 12 columns): a packed-B matmul as schedule_matmul_stage lays it out, j split
// by 16, its outer part fused with the batch dim (a fused loop has no main/tail partition, so the
// tail is guarded), accumulated in a local tile.
TEST(DropTileGuards, PaddedPackedMatmulLosesTheGuardInItsKLoop) {
    const int64_t m = 5, k = 8, n = 20, nb = 16;
    te::Tensor a = te::placeholder({1, m, k}, DType::kFloat32, "a");
    te::Tensor b = te::placeholder({2, k, nb}, DType::kFloat32, "b");
    te::IterVar r = te::reduce_axis(k, "k");
    te::Tensor c = te::compute({1, m, n}, [&](const std::vector<te::Var>& i) {
        te::Expr j = i[2];
        return te::sum(te::read(a, {te::Expr(i[0]), te::Expr(i[1]), te::Expr(r->var)}) *
                           te::read(b, {te::floordiv(j, te::int_imm(nb)), te::Expr(r->var), te::floormod(j, te::int_imm(nb))}),
                       {r});
    }, "c");
    te::Schedule s = te::create_schedule({c});
    te::Stage& st = s[c];
    auto [jo, ji] = st.split(st.axis(2), nb);
    st.reorder({st.axis(0), jo, st.axis(1), r, ji});
    te::IterVar outer = st.fuse(st.axis(0), jo);
    st.cache_write_local();
    st.parallel(outer);
    PrimFunc lowered = simplify(lower(s, {a, b, c}, "k"));
    PrimFunc f = drop_tile_guards(lowered);
    const std::string before = stmt_str(lowered.body), after = stmt_str(f.body);
    ASSERT_EQ(count_ifs(before), 2) << before;  // accumulation and write-back
    EXPECT_EQ(count_ifs(after), 1) << after;    // the write-back keeps its guard

    Tensor ta(DType::kFloat32, {1, m, k}), tb(DType::kFloat32, {2, k, nb});
    for (int64_t i = 0; i < m * k; ++i) ta.set_f64(i, fill(i));
    for (int64_t i = 0; i < 2 * k * nb; ++i) tb.set_f64(i, (i % nb) + 16 * (i / (k * nb)) < n ? fill(i + 3) : 0.0);
    std::vector<Tensor> args = {ta, tb, Tensor(DType::kFloat32, {1, m, n})};
    interpret(f, args);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t q = 0; q < k; ++q) want += ta.get_f64(i * k + q) * tb.get_f64((j / nb) * k * nb + q * nb + j % nb);
            EXPECT_DOUBLE_EQ(args[2].get_f64(i * n + j), want) << i << "," << j;
        }
}

// The same product on symbolic shapes (a symbolic compile: docs/dynamic_shapes.md): A [b, m, k]
// with b and m dims of the run, the column tile fused with the batch into one parallel loop
// (schedule_matmul_stage), so the guard reads floormod(fused, 2) and A's bounds are symbolic. A
// loads the same element for every lane of the tile and the guard admits each tile's first
// lane, so the k loop still loses its guard (it kept it before: a [20, 120] x [120, 6625]
// classifier ran 32x slower than the static kernel). Checked at several (b, m).
TEST(DropTileGuards, SymbolicBatchAndRowsLoseTheGuardInTheKLoop) {
    const int64_t k = 8, n = 20, nb = 16;
    te::Var bd = te::make_dim("b"), md = te::make_dim("m");
    te::Tensor a = te::sym_placeholder({te::ex(bd), te::ex(md), te::int_imm(k)}, DType::kFloat32, "a");
    te::Tensor b = te::placeholder({2, k, nb}, DType::kFloat32, "b");
    te::IterVar r = te::reduce_axis(k, "k");
    te::Tensor c = te::sym_compute({te::ex(bd), te::ex(md), te::int_imm(n)}, [&](const std::vector<te::Var>& i) {
        te::Expr j = i[2];
        return te::sum(te::read(a, {te::Expr(i[0]), te::Expr(i[1]), te::Expr(r->var)}) *
                           te::read(b, {te::floordiv(j, te::int_imm(nb)), te::Expr(r->var), te::floormod(j, te::int_imm(nb))}),
                       {r});
    }, "c", DType::kFloat32);
    te::Schedule s = te::create_schedule({c});
    te::Stage& st = s[c];
    auto [jo, ji] = st.split(st.axis(2), nb);
    st.reorder({st.axis(0), jo, st.axis(1), r, ji});
    te::IterVar outer = st.fuse(st.axis(0), jo);
    st.cache_write_local();
    st.parallel(outer);
    PrimFunc lowered = simplify(lower(s, {a, b, c}, "k"));
    PrimFunc f = drop_tile_guards(lowered);
    const std::string before = stmt_str(lowered.body), after = stmt_str(f.body);
    ASSERT_EQ(count_ifs(before), 2) << before;
    EXPECT_EQ(count_ifs(after), 1) << after;

    Tensor tb(DType::kFloat32, {2, k, nb});
    for (int64_t i = 0; i < 2 * k * nb; ++i) tb.set_f64(i, (i % nb) + 16 * (i / (k * nb)) < n ? fill(i + 3) : 0.0);
    for (auto [batch, m] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 7}}) {
        Tensor ta(DType::kFloat32, {batch, m, k});
        for (int64_t i = 0; i < batch * m * k; ++i) ta.set_f64(i, fill(i));
        std::vector<Tensor> args = {ta, tb, Tensor(DType::kFloat32, {batch, m, n})};
        interpret(f, args, {batch, m});
        for (int64_t row = 0; row < batch * m; ++row)
            for (int64_t j = 0; j < n; ++j) {
                double want = 0;
                for (int64_t q = 0; q < k; ++q) want += ta.get_f64(row * k + q) * tb.get_f64((j / nb) * k * nb + q * nb + j % nb);
                EXPECT_DOUBLE_EQ(args[2].get_f64(row * n + j), want) << batch << "x" << m << " " << row << "," << j;
            }
    }
}

// Hand-built tir (lowering partitions the loops these would need):
//   for t in 0..1 parallel { local acc[8] { acc[l] = 0 for l; for qo in 0..3 { for qi in 0..8 {
//     if (qo*8 + qi < 20) acc[<lane>] = acc[<lane>] + a[qo*8 + qi] } }  <write-back> } }
struct GuardedTile {
    Buffer a = te::make_buffer("a", DType::kFloat32, {24});
    Buffer out = te::make_buffer("out", DType::kFloat32, {24});
    Buffer acc = te::make_buffer("acc", DType::kFloat32, {8});
    te::Var t = te::make_var("t"), qo = te::make_var("qo"), qi = te::make_var("qi"), l = te::make_var("l");
    Expr cond() const { return te::ex(qo) * 8 + te::ex(qi) < te::int_imm(20); }

    PrimFunc func(const Expr& lane, int64_t a_len, const Stmt& write_back) {
        acc->local = true;
        a = te::make_buffer("a", DType::kFloat32, {a_len});
        Expr load_a = std::make_shared<te::BufferLoadNode>(DType::kFloat32, a, te::ex(qo) * 8 + te::ex(qi));
        Expr load_acc = std::make_shared<te::BufferLoadNode>(DType::kFloat32, acc, lane);
        Stmt accumulate = make_for(qo, te::int_imm(3), te::LoopKind::kSerial,
                                   make_for(qi, te::int_imm(8), te::LoopKind::kSerial,
                                            make_if(cond(), make_store(acc, lane, load_acc + load_a))));
        Stmt init = make_for(l, te::int_imm(8), te::LoopKind::kSerial, make_store(acc, te::ex(l), te::make_const(DType::kFloat32, 0)));
        Stmt body = make_allocate(acc, make_seq({init, accumulate, write_back}));
        return PrimFunc{"k", {a, out}, make_for(t, te::int_imm(1), te::LoopKind::kParallel, body)};
    }
    Expr acc_at(const Expr& i) const { return std::make_shared<te::BufferLoadNode>(DType::kFloat32, acc, i); }
};

// A sum over q < 20 in one accumulator (every q the same lane): padding lanes would reach it.
TEST(DropTileGuards, KeepsTheGuardOfAReduction) {
    GuardedTile g;
    Stmt write_back = make_store(g.out, te::int_imm(0), g.acc_at(te::int_imm(0)));
    PrimFunc f = drop_tile_guards(g.func(te::int_imm(0), 24, write_back));
    EXPECT_EQ(count_ifs(stmt_str(f.body)), 1) << stmt_str(f.body);
    Tensor in(DType::kFloat32, {24});
    for (int64_t i = 0; i < 24; ++i) in.set_f64(i, fill(i) + 1.0);
    std::vector<Tensor> args = {in, Tensor(DType::kFloat32, {24})};
    interpret(f, args);
    double want = 0;
    for (int64_t i = 0; i < 20; ++i) want += in.get_f64(i);
    EXPECT_DOUBLE_EQ(args[1].get_f64(0), want);
}

// One lane per qi, but a has 20 elements: the padding lanes would read past its end.
TEST(DropTileGuards, KeepsTheGuardOfAReadPastTheEnd) {
    GuardedTile g;
    Stmt write_back = make_for(g.l, te::int_imm(8), te::LoopKind::kSerial,
                               make_store(g.out, te::ex(g.l), g.acc_at(te::ex(g.l))));
    PrimFunc f = drop_tile_guards(g.func(te::ex(g.qi), 20, write_back));
    EXPECT_EQ(count_ifs(stmt_str(f.body)), 1) << stmt_str(f.body);
}

// In bounds and one lane per qi (qo is summed into each lane, and qo*8 + qi < 20 depends on qo):
// lanes 4..7 are real for qo < 2 only, so padding iterations write real lanes.
TEST(DropTileGuards, KeepsTheGuardWhenALaneMixesRealAndPaddingIterations) {
    GuardedTile g;
    Stmt write_back = make_for(g.l, te::int_imm(8), te::LoopKind::kSerial,
                               make_store(g.out, te::ex(g.l), g.acc_at(te::ex(g.l))));
    PrimFunc f = drop_tile_guards(g.func(te::ex(g.qi), 24, write_back));
    EXPECT_EQ(count_ifs(stmt_str(f.body)), 1) << stmt_str(f.body);
}

}  // namespace
}  // namespace kiln::tir
