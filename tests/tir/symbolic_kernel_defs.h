// TE definitions and CPU schedules of the kernels used to test and time symbolic-shape kernels
// (tests/tir/symbolic_lower_test.cc, tests/codegen/symbolic_kernel_test.cc,
// bench/symbolic_kernels.cc). Every builder takes its dims as expressions: a dim Var gives the
// symbolic kernel, an IntImm the static kernel of the same definition and schedule, so the two
// differ only in what is known at compile time.
#pragma once

#include <string>
#include <vector>

#include "te/schedule.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::symtest {

using te::Expr;
using te::Tensor;
using te::Var;

/// A lowered, simplified kernel and the tensors of its params.
struct Built {
    tir::PrimFunc func;
};

inline Built finish(te::Schedule& s, const std::vector<Tensor>& args, const std::string& name) {
    return {tir::simplify(tir::lower(s, args, name))};
}

/// Y[r, h] = X[r, h] + B[h]: rows split by 4 (outer parallel), hidden split by 16 (vectorized).
inline Built bias_add(const Expr& rows, const Expr& hidden, const std::string& name) {
    Tensor x = te::sym_placeholder({rows, hidden}, DType::kFloat32, "X");
    Tensor b = te::sym_placeholder({hidden}, DType::kFloat32, "B");
    Tensor y = te::sym_compute(
        {rows, hidden}, [&](const std::vector<Var>& i) { return te::read(x, i) + te::read(b, {te::ex(i[1])}); },
        "Y");
    te::Schedule s = te::create_schedule({y});
    te::Stage& st = s[y];
    auto [ro, ri] = st.split(st.axis(0), 4);
    auto [ho, hi] = st.split(st.axis(1), 16);
    st.parallel(ro);
    st.vectorize(hi);
    return finish(s, {x, b, y}, name);
}

/// Row softmax Y[r, c] over [rows, cols]: row max and row sum of exp are reductions over the
/// (symbolic) cols; the exp is inlined; the output's cols are split by 16 and vectorized.
inline Built softmax(const Expr& rows, const Expr& cols, const std::string& name) {
    Tensor x = te::sym_placeholder({rows, cols}, DType::kFloat32, "X");
    te::IterVar k1 = te::reduce_axis(cols, "k1");
    Tensor mx = te::sym_compute(
        {rows}, [&](const std::vector<Var>& i) { return te::max_reduce(te::read(x, {te::ex(i[0]), te::ex(k1->var)}), {k1}); },
        "M");
    Tensor e = te::sym_compute(
        {rows, cols},
        [&](const std::vector<Var>& i) { return te::unary(te::UnaryOp::kExp, te::read(x, i) - te::read(mx, {te::ex(i[0])})); },
        "E");
    te::IterVar k2 = te::reduce_axis(cols, "k2");
    Tensor sum = te::sym_compute(
        {rows}, [&](const std::vector<Var>& i) { return te::sum(te::read(e, {te::ex(i[0]), te::ex(k2->var)}), {k2}); },
        "S");
    Tensor y = te::sym_compute(
        {rows, cols}, [&](const std::vector<Var>& i) { return te::read(e, i) / te::read(sum, {te::ex(i[0])}); }, "Y");
    te::Schedule s = te::create_schedule({y});
    s[e].compute_inline();
    s[mx].parallel(s[mx].axis(0));
    s[sum].parallel(s[sum].axis(0));
    te::Stage& st = s[y];
    auto [co, ci] = st.split(st.axis(1), 16);
    st.parallel(st.axis(0));
    st.vectorize(ci);
    return finish(s, {x, y}, name);
}

/// Column sums Y[h] = sum_r X[r, h] over a symbolic reduce extent `rows`: hidden split by 16
/// (outer parallel, inner vectorized), the rows split by 4 (inner unrolled), accumulated in a
/// local 16-wide tile.
inline Built column_sum(const Expr& rows, const Expr& hidden, const std::string& name) {
    Tensor x = te::sym_placeholder({rows, hidden}, DType::kFloat32, "X");
    te::IterVar r = te::reduce_axis(rows, "r");
    Tensor y = te::sym_compute(
        {hidden}, [&](const std::vector<Var>& i) { return te::sum(te::read(x, {te::ex(r->var), te::ex(i[0])}), {r}); },
        "Y");
    te::Schedule s = te::create_schedule({y});
    te::Stage& st = s[y];
    auto [ho, hi] = st.split(st.axis(0), 16);
    auto [ro, ri] = st.split(st.reduce_axis(0), 4);
    st.reorder({ho, ro, ri, hi});
    st.parallel(ho);
    st.unroll(ri);
    st.vectorize(hi);
    st.cache_write_local();
    return finish(s, {x, y}, name);
}

/// C[m, n] = A[m, k] x B[k, n], the schedule of a dense layer: n split by nc (outer parallel,
/// inner vectorized), m split by mr (inner unrolled), order (no, mo, k, mi, ni), an mr x nc
/// register tile (cache_write_local).
inline Built matmul(const Expr& m, const Expr& k, const Expr& n, int64_t mr, int64_t nc, const std::string& name) {
    Tensor a = te::sym_placeholder({m, k}, DType::kFloat32, "A");
    Tensor b = te::sym_placeholder({k, n}, DType::kFloat32, "B");
    te::IterVar r = te::reduce_axis(k, "r");
    Tensor c = te::sym_compute(
        {m, n},
        [&](const std::vector<Var>& i) {
            return te::sum(te::read(a, {te::ex(i[0]), te::ex(r->var)}) * te::read(b, {te::ex(r->var), te::ex(i[1])}), {r});
        },
        "C");
    te::Schedule s = te::create_schedule({c});
    te::Stage& st = s[c];
    auto [mo, mi] = st.split(st.axis(0), mr);
    auto [no, ni] = st.split(st.axis(1), nc);
    st.reorder({no, mo, r, mi, ni});
    st.parallel(no);
    st.unroll(mi);
    st.vectorize(ni);
    st.cache_write_local();
    return finish(s, {a, b, c}, name);
}

/// Y[n, c, h, w] = X[n, c / 16, h, w, c % 16] over [n, 32, h, w] (a blocked-to-plain layout
/// conversion): (n, c-block, h) fused into one parallel loop, whose index the kernel divides
/// by h and by 2 to address both tensors; w split by 16 and vectorized inside.
inline Built from_blocked(const Expr& n, const Expr& h, const Expr& w, const std::string& name) {
    Tensor x = te::sym_placeholder({n, te::int_imm(2), h, w, te::int_imm(16)}, DType::kFloat32, "X");
    Tensor y = te::sym_compute(
        {n, te::int_imm(32), h, w},
        [&](const std::vector<Var>& i) {
            return te::read(x, {te::ex(i[0]), te::floordiv(i[1], te::int_imm(16)), te::ex(i[2]), te::ex(i[3]),
                                te::floormod(i[1], te::int_imm(16))});
        },
        "Y");
    te::Schedule s = te::create_schedule({y});
    te::Stage& st = s[y];
    auto [co, ci] = st.split(st.axis(1), 16);
    auto [wo, wi] = st.split(st.axis(3), 16);
    st.reorder({st.axis(0), co, st.axis(2), wo, ci, wi});
    te::IterVar outer = st.fuse(st.fuse(st.axis(0), co), st.axis(2));
    st.vectorize(wi);
    st.parallel(outer);
    return finish(s, {x, y}, name);
}

}  // namespace kiln::symtest
