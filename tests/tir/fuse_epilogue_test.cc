// Stage::fuse_epilogue: a register-tiled product whose tile write-back computes its elementwise
// epilogue (bias, ReLU, residual) writes each output element once, from the tile, and gives the
// formula's values under tiles that do and do not divide the matrix. Reference: the formula
// evaluated in double in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <string>

#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

struct BiasReluResidual {
    int64_t m, n, k;
    te::Tensor a, b, bias, resid, r, o;

    BiasReluResidual(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
        a = te::placeholder({m, k}, DType::kFloat32, "a");
        b = te::placeholder({k, n}, DType::kFloat32, "b");
        bias = te::placeholder({n}, DType::kFloat32, "bias");
        resid = te::placeholder({m, n}, DType::kFloat32, "resid");
        te::IterVar kk = te::reduce_axis(k, "kk");
        r = te::compute({m, n}, [&](const std::vector<te::Var>& i) {
            return te::sum(te::read(a, {te::Expr(i[0]), te::Expr(kk->var)}) * te::read(b, {te::Expr(kk->var), te::Expr(i[1])}),
                           {kk});
        }, "r");
        o = te::compute({m, n}, [&](const std::vector<te::Var>& i) {
            te::Expr v = te::read(r, i) + te::read(bias, {te::Expr(i[1])});
            return te::binary(te::BinaryOp::kMax, v, te::make_const(DType::kFloat32, 0)) + te::read(resid, i);
        }, "o");
    }

    /// Register tile mr x nc of r (outer loops, k, the tile), local accumulation in o's buffer; the
    /// epilogue fused into the write-back or a pass of its own.
    te::Schedule schedule(int64_t mr, int64_t nc, bool fuse) const {
        te::Schedule s = te::create_schedule({o});
        te::Stage& st = s[r];
        auto [io, ii] = st.split(st.axis(0), mr);
        auto [jo, ji] = st.split(st.axis(1), nc);
        st.reorder({io, jo, st.reduce_axis(0), ii, ji});
        st.unroll(ii);
        st.vectorize(ji);
        st.cache_write_local();
        if (fuse) st.fuse_epilogue(s[o]);
        else st.store_in(o);  // what lower_group did before: the epilogue updates o in place
        return s;
    }

    void check(const PrimFunc& f, std::mt19937& rng, const std::string& what) const {
        std::uniform_real_distribution<double> u(-1, 1);
        std::vector<Tensor> args = {Tensor(DType::kFloat32, {m, k}), Tensor(DType::kFloat32, {k, n}),
                                    Tensor(DType::kFloat32, {n}), Tensor(DType::kFloat32, {m, n}),
                                    Tensor(DType::kFloat32, {m, n})};
        for (size_t t = 0; t < 4; ++t)
            for (int64_t i = 0; i < args[t].numel(); ++i) args[t].set_f64(i, u(rng));
        for (int64_t i = 0; i < m * n; ++i) args[4].set_f64(i, 1e9);  // stale values must be overwritten
        interpret(f, args);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (int64_t q = 0; q < k; ++q) acc += args[0].get_f64(i * k + q) * args[1].get_f64(q * n + j);
                const double want = std::max(acc + args[2].get_f64(j), 0.0) + args[3].get_f64(i * n + j);
                EXPECT_NEAR(args[4].get_f64(i * n + j), want, 1e-5) << what << " at " << i << "," << j;
            }
    }
};

/// Whether a statement of `f` loads from buffer `name` (the right-hand side of a store).
bool loads_from(const PrimFunc& f, const std::string& name) {
    const std::string s = stmt_str(f.body);
    for (size_t eq = 0; (eq = s.find(" = ", eq)) != std::string::npos; ++eq) {
        const std::string rhs = s.substr(eq + 3, s.find('\n', eq) - eq - 3);
        for (size_t pos = 0; (pos = rhs.find(name + "[", pos)) != std::string::npos; ++pos)
            if (pos == 0 || !(std::isalnum(static_cast<unsigned char>(rhs[pos - 1])) || rhs[pos - 1] == '_')) return true;
    }
    return false;
}

TEST(FuseEpilogue, TiledProductWithBiasReluResidualMatchesTheFormula) {
    std::mt19937 rng(5);
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{6, 8, 5}, {7, 10, 3}, {1, 3, 9}, {5, 16, 4}}) {
        BiasReluResidual p(m, n, k);
        for (auto [mr, nc] : {std::pair<int64_t, int64_t>{2, 4}, {3, 8}, {1, 16}}) {
            const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " tile " +
                                     std::to_string(mr) + "x" + std::to_string(nc);
            PrimFunc fused = simplify(lower(p.schedule(mr, nc, true), {p.a, p.b, p.bias, p.resid, p.o}, "k"));
            PrimFunc apart = simplify(lower(p.schedule(mr, nc, false), {p.a, p.b, p.bias, p.resid, p.o}, "k"));
            // Fused: o is only written, from the tile; apart, the epilogue's pass reads back
            // the products that r's write-back stored in o.
            EXPECT_FALSE(loads_from(fused, "o")) << what << "\n" << stmt_str(fused.body);
            EXPECT_TRUE(loads_from(apart, "o")) << what << "\n" << stmt_str(apart.body);
            p.check(fused, rng, what + " fused");
            p.check(apart, rng, what + " apart");
        }
    }
}

TEST(FuseEpilogue, NeedsALocalTileReduction) {
    BiasReluResidual p(4, 4, 4);
    te::Schedule s = te::create_schedule({p.o});
    EXPECT_THROW(s[p.r].fuse_epilogue(s[p.o]), Error);  // no cache_write_local
    s[p.r].cache_write_local();
    EXPECT_THROW(s[p.r].fuse_epilogue(s[p.r]), Error);  // itself
    EXPECT_THROW(s[p.o].fuse_epilogue(s[p.r]), Error);  // o is no reduction
}

}  // namespace
}  // namespace kiln::tir
