// Lowering and interpreting symbolic-shape kernels: each kernel is lowered ONCE with symbolic
// dims and interpreted at several sizes (1, sizes that are not multiples of the split factors,
// multiples), compared with naive loops written here (the independent reference) and with the
// static kernel of the same definition lowered for that size.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>

#include "support/error.h"
#include "symbolic_kernel_defs.h"
#include "tir/interpreter.h"
#include "tir/kernel_dims.h"

using namespace kiln;
using te::Expr;
using te::Var;

namespace {
kiln::Tensor random_tensor(Shape shape, uint32_t seed) {
    kiln::Tensor x(DType::kFloat32, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
    return x;
}
bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
template <typename F>
void expect_error(F&& f, const std::string& substring) {
    try {
        f();
        ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        EXPECT_TRUE(contains(e.what(), substring)) << e.what();
    }
}
void expect_close(const kiln::Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
    for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_NEAR(got.get_f64(i), want[static_cast<size_t>(i)], tol * (1 + std::abs(want[static_cast<size_t>(i)])))
            << what << " element " << i;
}
Expr c(int64_t v) { return te::int_imm(v); }
/// a [m, k] x b [k, n] in float64, row-major (the reference of the tiled matmuls).
std::vector<double> naive_matmul(const kiln::Tensor& a, const kiln::Tensor& b, int64_t m, int64_t k, int64_t n) {
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t r = 0; r < k; ++r) s += a.get_f64(i * k + r) * b.get_f64(r * n + j);
            out.push_back(s);
        }
    return out;
}
}  // namespace

TEST(SymbolicLower, BiasAddTextHasDimsMainLoopAndTail) {
    Var n = te::make_dim("n");
    tir::PrimFunc f = symtest::bias_add(n, c(384), "bias_add").func;
    ASSERT_EQ(f.dims.size(), 1u);
    EXPECT_EQ(f.dims[0], n);
    std::string text = tir::func_str(f);
    EXPECT_TRUE(contains(text, "X: f32[n,384]")) << text;
    EXPECT_TRUE(contains(text, "; dims n")) << text;
    // floordiv(n, 4) full row tiles in parallel, unguarded; the vectorized loop keeps extent 16.
    EXPECT_TRUE(contains(text, "in 0..floordiv(n, 4) parallel {")) << text;
    EXPECT_TRUE(contains(text, "in 0..16 vectorized {")) << text;
    // The tail: floormod(n, 4) rows.
    EXPECT_TRUE(contains(text, "in 0..floormod(n, 4) {")) << text;
    EXPECT_FALSE(contains(text, "if (")) << text;
}

TEST(SymbolicLower, BiasAddMatchesNaiveAtSeveralSizes) {
    Var n = te::make_dim("n");
    tir::PreparedFunc k(symtest::bias_add(n, c(40), "bias_add").func);
    for (int64_t rows : {1, 3, 4, 9, 17}) {
        std::vector<kiln::Tensor> args = {random_tensor({rows, 40}, 1), random_tensor({40}, 2),
                                          kiln::Tensor(DType::kFloat32, {rows, 40})};
        k.run(args, {rows});
        std::vector<double> want;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t h = 0; h < 40; ++h)
                want.push_back(static_cast<float>(args[0].get_f64(r * 40 + h) + args[1].get_f64(h)));
        expect_close(args[2], want, 0, "rows=" + std::to_string(rows));
    }
}

TEST(SymbolicLower, SoftmaxBothDimsSymbolicMatchesNaive) {
    Var n = te::make_dim("n"), m = te::make_dim("m");
    tir::PrimFunc f = symtest::softmax(n, m, "softmax").func;
    ASSERT_EQ(f.dims.size(), 2u);
    tir::PreparedFunc k(f);
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 15}, {3, 16}, {5, 37}}) {
        std::vector<kiln::Tensor> args = {random_tensor({rows, cols}, 3), kiln::Tensor(DType::kFloat32, {rows, cols})};
        k.run(args, {rows, cols});
        std::vector<double> want;
        for (int64_t r = 0; r < rows; ++r) {
            double mx = -INFINITY, s = 0;
            for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, args[0].get_f64(r * cols + j));
            for (int64_t j = 0; j < cols; ++j) s += std::exp(args[0].get_f64(r * cols + j) - mx);
            for (int64_t j = 0; j < cols; ++j) want.push_back(std::exp(args[0].get_f64(r * cols + j) - mx) / s);
        }
        expect_close(args[1], want, 1e-5, std::to_string(rows) + "x" + std::to_string(cols));
    }
}

TEST(SymbolicLower, SymbolicReduceExtentMatchesNaive) {
    Var n = te::make_dim("n");
    tir::PrimFunc f = symtest::column_sum(n, c(48), "colsum").func;
    std::string text = tir::func_str(f);
    EXPECT_TRUE(contains(text, "floordiv(n, 4)")) << text;
    tir::PreparedFunc k(f);
    for (int64_t rows : {0, 1, 2, 4, 11}) {
        std::vector<kiln::Tensor> args = {random_tensor({rows, 48}, 4), kiln::Tensor(DType::kFloat32, {48})};
        k.run(args, {rows});
        std::vector<double> want(48, 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t h = 0; h < 48; ++h) want[static_cast<size_t>(h)] += args[0].get_f64(r * 48 + h);
        expect_close(args[1], want, 1e-5, "rows=" + std::to_string(rows));
    }
}

TEST(SymbolicLower, TiledMatmulMatchesNaiveAndStaticKernel) {
    Var m = te::make_dim("m");
    const int64_t K = 20, N = 48;
    tir::PreparedFunc k(symtest::matmul(m, c(K), c(N), 3, 16, "mm").func);
    for (int64_t rows : {1, 2, 3, 7, 12}) {
        std::vector<kiln::Tensor> args = {random_tensor({rows, K}, 5), random_tensor({K, N}, 6),
                                          kiln::Tensor(DType::kFloat32, {rows, N})};
        k.run(args, {rows});
        expect_close(args[2], naive_matmul(args[0], args[1], rows, K, N), 1e-5, "m=" + std::to_string(rows));
        // The static kernel of the same schedule adds in the same order: bit-identical.
        std::vector<kiln::Tensor> sargs = {args[0], args[1], kiln::Tensor(DType::kFloat32, {rows, N})};
        tir::interpret(symtest::matmul(c(rows), c(K), c(N), 3, 16, "mm_static").func, sargs);
        for (int64_t i = 0; i < rows * N; ++i) ASSERT_EQ(sargs[2].get_f64(i), args[2].get_f64(i)) << i;
    }
}

// A register tile split along a symbolic extent runs its partial tile (rows mod the factor) as
// sub-tiles of 4, 2 and 1 rows at run-time offsets: every remainder, with both dims symbolic
// (attention's q.k^T), against naive loops and, bit for bit, the static kernel of each size.
TEST(SymbolicLower, TiledMatmulTailSubTilesCoverEveryRemainder) {
    Var m = te::make_dim("m"), n = te::make_dim("n");
    const int64_t K = 9;
    for (int64_t mr : {8, 6}) {
        tir::PrimFunc f = symtest::matmul(m, c(K), n, mr, 16, "mm").func;
        // One copy of the store per sub-tile size (4, 2, 1) and the full tile, in each of the
        // column split's main part and tail: not one per remainder (8 copies per part).
        const std::string text = tir::func_str(f);
        size_t stores = 0;
        for (size_t at = text.find("C["); at != std::string::npos; at = text.find("C[", at + 1)) ++stores;
        EXPECT_EQ(stores, 8u) << text;
        tir::PreparedFunc k(f);
        for (int64_t rows = 1; rows <= 2 * mr + 3; ++rows) {
            for (int64_t cols : {5, 16, 37}) {
                std::vector<kiln::Tensor> args = {random_tensor({rows, K}, 5), random_tensor({K, cols}, 6),
                                                  kiln::Tensor(DType::kFloat32, {rows, cols})};
                k.run(args, {rows, cols});
                const std::string what = "mr=" + std::to_string(mr) + " m=" + std::to_string(rows) +
                                         " n=" + std::to_string(cols);
                expect_close(args[2], naive_matmul(args[0], args[1], rows, K, cols), 1e-5, what);
                std::vector<kiln::Tensor> sargs = {args[0], args[1], kiln::Tensor(DType::kFloat32, {rows, cols})};
                tir::interpret(symtest::matmul(c(rows), c(K), c(cols), mr, 16, "mm_static").func, sargs);
                for (int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(sargs[2].get_f64(i), args[2].get_f64(i)) << what << " " << i;
            }
        }
    }
}

TEST(SymbolicLower, BadDimsAreErrors) {
    Var n = te::make_dim("n");
    tir::PrimFunc f = symtest::bias_add(n, c(8), "bias_add").func;
    tir::PreparedFunc k(f);
    std::vector<kiln::Tensor> args = {random_tensor({4, 8}, 1), random_tensor({8}, 2), kiln::Tensor(DType::kFloat32, {4, 8})};
    expect_error([&] { k.run(args, {-1}); }, "dim 'n' must be >= 0, got -1");
    expect_error([&] { k.run(args, {5}); }, "argument 0 ('X') expected 40 elements, got 32");
    expect_error([&] { k.run(args, {}); }, "expected 1 dim values, got 0");
    expect_error([&] { k.run(args, {4, 4}); }, "expected 1 dim values, got 2");
    expect_error([&] { tir::param_numels(f, {std::numeric_limits<int64_t>::max() / 4}); }, "int64");
    expect_error([&] { tir::check_call(f, {4}, {32, 8, 31}); }, "argument 2 ('Y') expected 32 elements");
    tir::check_call(f, {4}, {32, 8, 32});
}

TEST(SymbolicLower, UnboundDimIsAnError) {
    Var n = te::make_dim("n"), m = te::make_dim("m");
    te::Tensor x = te::sym_placeholder({n}, DType::kFloat32, "X");
    te::Tensor y = te::sym_compute({n * m}, [&](const std::vector<Var>& i) { return te::read(x, {te::floordiv(i[0], m)}); }, "Y");
    te::Schedule s = te::create_schedule({y});
    // m is only in the output's shape: found from the args.
    tir::PrimFunc f = tir::lower(s, {x, y}, "k");
    EXPECT_EQ(f.dims.size(), 2u);
    expect_error([&] { tir::lower(s, {x, y}, "k", {n}); }, "symbolic dim 'm'");
    expect_error([&] { tir::lower(s, {x, y}, "k", {n, m, n}); }, "listed twice");
}

TEST(SymbolicLower, SimplifierShrinksSymbolicTailGuard) {
    // for i in 0..8 { if (q*8 + i < n) store }  ->  for i in 0..min(8, n - q*8)
    Var n = te::make_dim("n"), i = te::make_var("i"), q = te::make_var("q");
    te::Buffer b = te::make_sym_buffer("B", DType::kFloat32, {n});
    Expr idx = Expr(q) * c(8) + Expr(i);
    tir::Stmt body = tir::make_for(i, c(8), te::LoopKind::kSerial,
                                   tir::make_if(idx < Expr(n), tir::make_store(b, idx, te::float_imm(1))));
    std::string text = tir::stmt_str(tir::simplify(body));
    EXPECT_TRUE(contains(text, "for i in 0..min(q*-8 + n, 8)")) << text;
    EXPECT_FALSE(contains(text, "if (")) << text;
    // n - floordiv(n, 8)*8 is floormod(n, 8), known below 8: the min goes.
    tir::Stmt tail = tir::substitute(body, {{q.get(), te::floordiv(n, c(8))}});
    text = tir::stmt_str(tir::simplify(tail));
    EXPECT_TRUE(contains(text, "for i in 0..floormod(n, 8) {")) << text;
    // A bound that reads a buffer (which the body might write) keeps its guard.
    te::Buffer w = te::make_sym_buffer("W", DType::kInt64, {n});
    Expr load = std::make_shared<te::BufferLoadNode>(DType::kInt64, w, c(0));
    tir::Stmt by_load = tir::make_for(i, c(8), te::LoopKind::kSerial,
                                      tir::make_if(Expr(i) + load < Expr(n), tir::make_store(w, c(0), Expr(i))));
    text = tir::stmt_str(tir::simplify(by_load));
    EXPECT_TRUE(contains(text, "for i in 0..8 {")) << text;
    EXPECT_TRUE(contains(text, "if (")) << text;
}

namespace {
// y = 2x over [n, 7], all axes fused then split by 16 (the default elementwise schedule's
// shape) and, when `nested`, the outer split again by 3: floordiv/floormod recovery over a
// symbolic fused extent and guards of nested symbolic splits.
tir::PrimFunc fused_scale(const Var& n, bool nested) {
    te::Tensor x = te::sym_placeholder({n, c(7)}, DType::kFloat32, "X");
    te::Tensor y = te::sym_compute({n, c(7)}, [&](const std::vector<Var>& i) { return te::read(x, i) * te::float_imm(2); }, "Y");
    te::Schedule s = te::create_schedule({y});
    te::Stage& st = s[y];
    auto [o, i] = st.split(st.fuse(st.axis(0), st.axis(1)), 16);
    st.vectorize(i);
    if (nested) {
        auto [oo, oi] = st.split(o, 3);
        st.parallel(oo);
    } else {
        st.parallel(o);
    }
    return tir::simplify(tir::lower(s, {x, y}, "fused_scale"));
}
}  // namespace

TEST(SymbolicLower, FusedAndNestedSymbolicSplits) {
    Var n = te::make_dim("n");
    for (bool nested : {false, true}) {
        tir::PreparedFunc k(fused_scale(n, nested));
        for (int64_t rows : {0, 1, 2, 3, 7, 16, 23}) {
            std::vector<kiln::Tensor> args = {random_tensor({rows, 7}, 9), kiln::Tensor(DType::kFloat32, {rows, 7})};
            for (int64_t i = 0; i < rows * 7; ++i) args[1].set_f64(i, NAN);  // a skipped element shows
            k.run(args, {rows});
            std::vector<double> want;
            for (int64_t i = 0; i < rows * 7; ++i) want.push_back(static_cast<float>(args[0].get_f64(i) * 2));
            expect_close(args[1], want, 0, "nested=" + std::to_string(nested) + " rows=" + std::to_string(rows));
        }
    }
}

TEST(SymbolicLower, MatmulWithEveryDimSymbolic) {
    // m and n split (two peels, a corner tail), k a symbolic reduce extent, a static 3x8 tile.
    Var m = te::make_dim("m"), kd = te::make_dim("k"), n = te::make_dim("n");
    tir::PrimFunc f = symtest::matmul(m, kd, n, 3, 8, "mm_dyn").func;
    ASSERT_EQ(f.dims.size(), 3u);  // first appearance in A[m, k], B[k, n]
    EXPECT_EQ(f.dims[1], kd);
    tir::PreparedFunc k(f);
    for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {4, 3, 9}, {6, 5, 16}, {7, 0, 3}}) {
        std::vector<kiln::Tensor> args = {random_tensor({M, K}, 11), random_tensor({K, N}, 12),
                                          kiln::Tensor(DType::kFloat32, {M, N})};
        for (int64_t i = 0; i < M * N; ++i) args[2].set_f64(i, NAN);
        k.run(args, {M, K, N});
        std::vector<double> want;
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t r = 0; r < K; ++r) s += args[0].get_f64(i * K + r) * args[1].get_f64(r * N + j);
                want.push_back(s);
            }
        expect_close(args[2], want, 1e-5, std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N));
    }
}
