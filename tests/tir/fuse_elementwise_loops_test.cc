// fuse_elementwise_loops: SGD with momentum's two outputs (v' = mu*v + g, p' = p - lr*v', p'
// reading v') lower to two nests and fuse into one; a second output reading the first at
// another element (reversed columns), or nests of different loop kinds, stay apart. Each
// function is run by the tir interpreter and compared with the formula evaluated here.
#include <gtest/gtest.h>

#include <string>

#include "te/schedule.h"
#include "tir/fuse_elementwise_loops.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

constexpr int64_t kRows = 5, kCols = 40;

int count_loops(const std::string& s) {
    int n = 0;
    for (size_t p = s.find("for "); p != std::string::npos; p = s.find("for ", p + 1)) ++n;
    return n;
}

double fill(int64_t i, int seed) { return static_cast<double>((i * 7 + seed * 5) % 13) - 6.0; }

struct Sgd {
    te::Tensor v, g, p, mu, lr, vn, pn;
};

/// v' = mu*v + g; p' = p - lr * v'[i, col(j)] (col(j) = j: SGD with momentum).
Sgd sgd(bool reversed) {
    Sgd s;
    s.v = te::placeholder({kRows, kCols}, DType::kFloat32, "v");
    s.g = te::placeholder({kRows, kCols}, DType::kFloat32, "g");
    s.p = te::placeholder({kRows, kCols}, DType::kFloat32, "p");
    s.mu = te::placeholder({}, DType::kFloat32, "mu");
    s.lr = te::placeholder({}, DType::kFloat32, "lr");
    s.vn = te::compute({kRows, kCols}, [&](const std::vector<te::Var>& i) {
        return te::read(s.v, i) * te::read(s.mu, std::vector<te::Expr>{}) + te::read(s.g, i);
    }, "vn");
    s.pn = te::compute({kRows, kCols}, [&](const std::vector<te::Var>& i) {
        te::Expr col = reversed ? te::int_imm(kCols - 1) - te::Expr(i[1]) : te::Expr(i[1]);
        return te::read(s.p, i) - te::read(s.lr, std::vector<te::Expr>{}) * te::read(s.vn, {te::Expr(i[0]), col});
    }, "pn");
    return s;
}

/// Both outputs: rows parallel, columns split by 8 with the inner part vectorized (the default
/// elementwise schedule's shape); `serial_second`: the second's rows serial instead.
PrimFunc lowered(const Sgd& s, bool serial_second) {
    te::Schedule sch = te::create_schedule({s.vn, s.pn});
    for (const te::Tensor& t : {s.vn, s.pn}) {
        te::Stage& st = sch[t];
        auto [jo, ji] = st.split(st.axis(1), 8);
        st.vectorize(ji);
        if (!(serial_second && t == s.pn)) st.parallel(st.axis(0));
    }
    return simplify(lower(sch, {s.v, s.g, s.p, s.mu, s.lr, s.vn, s.pn}, "sgd"));
}

void check_values(const PrimFunc& f, bool reversed) {
    const int64_t n = kRows * kCols;
    std::vector<Tensor> args;
    for (int k = 0; k < 3; ++k) {
        args.emplace_back(DType::kFloat32, Shape{kRows, kCols});
        for (int64_t i = 0; i < n; ++i) args.back().set_f64(i, fill(i, k));
    }
    args.emplace_back(DType::kFloat32, Shape{});
    args.back().set_f64(0, 0.5);
    args.emplace_back(DType::kFloat32, Shape{});
    args.back().set_f64(0, 0.25);
    args.emplace_back(DType::kFloat32, Shape{kRows, kCols});
    args.emplace_back(DType::kFloat32, Shape{kRows, kCols});
    interpret(f, args);
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t c = 0; c < kCols; ++c) {
            auto vn = [&](int64_t col) { return fill(r * kCols + col, 0) * 0.5 + fill(r * kCols + col, 1); };
            const int64_t i = r * kCols + c;
            EXPECT_DOUBLE_EQ(args[5].get_f64(i), vn(c)) << "v' " << r << "," << c;
            const double pn = fill(i, 2) - 0.25 * vn(reversed ? kCols - 1 - c : c);
            EXPECT_DOUBLE_EQ(args[6].get_f64(i), pn) << "p' " << r << "," << c;
        }
}

TEST(FuseElementwiseLoops, SgdMomentumsTwoOutputsRunAsOneNest) {
    const PrimFunc before = lowered(sgd(false), false);
    const PrimFunc after = fuse_elementwise_loops(before);
    ASSERT_EQ(count_loops(stmt_str(before.body)), 6) << stmt_str(before.body);
    EXPECT_EQ(count_loops(stmt_str(after.body)), 3) << stmt_str(after.body);
    check_values(before, false);
    check_values(after, false);
}

TEST(FuseElementwiseLoops, ReadsAtAnotherElementStayApart) {
    const PrimFunc before = lowered(sgd(true), false);
    const PrimFunc after = fuse_elementwise_loops(before);
    EXPECT_EQ(count_loops(stmt_str(after.body)), count_loops(stmt_str(before.body))) << stmt_str(after.body);
    check_values(after, true);
}

TEST(FuseElementwiseLoops, DifferentLoopKindsStayApart) {
    const PrimFunc before = lowered(sgd(false), true);
    const PrimFunc after = fuse_elementwise_loops(before);
    EXPECT_EQ(count_loops(stmt_str(after.body)), 6) << stmt_str(after.body);
    check_values(after, false);
}

}  // namespace
}  // namespace kiln::tir
