// Symbolic-shape kernels through the C emitter: each kernel is compiled ONCE with its dims as
// parameters (kiln_kernel_dims_fn) and run at several sizes (1, sizes that are not multiples of
// the split factors, multiples), serially and on a thread pool, compared with the tir
// interpreter at the same dims and with naive loops written here.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "../tir/symbolic_kernel_defs.h"
#include "kernel_test_util.h"
#include "tir/interpreter.h"
#include "tir/kernel_dims.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::Expr;
using te::Var;

Expr c(int64_t v) { return te::int_imm(v); }

kiln::Tensor random_tensor(Shape shape, uint32_t seed) {
    kiln::Tensor x(DType::kFloat32, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
    return x;
}

/// Runs the compiled kernel and the interpreter at `dims` on the same inputs (outputs filled
/// with NaN first, so an element the kernel skips is caught) and returns the compiled run's
/// args after checking the two agree within `rtol` (0: bit-exact).
std::vector<kiln::Tensor> run_both(const LoadedKernel& k, const tir::PrimFunc& f, const std::vector<int64_t>& dims,
                                   size_t num_inputs, double rtol, runtime::ThreadPool* pool) {
    const te::DimValues bound = tir::bind_dims(f, dims);
    std::vector<kiln::Tensor> args;
    for (size_t p = 0; p < f.params.size(); ++p) {
        std::vector<int64_t> shape = tir::buffer_shape(f.params[p], bound);
        kiln::Tensor t = p < num_inputs ? random_tensor(shape, static_cast<uint32_t>(17 + p)) : kiln::Tensor(DType::kFloat32, shape);
        if (p >= num_inputs)
            for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, NAN);
        args.push_back(std::move(t));
    }
    std::vector<int64_t> numels;
    for (const auto& a : args) numels.push_back(a.numel());
    tir::check_call(f, dims, numels);
    std::vector<kiln::Tensor> ref = clone_all(args);
    tir::interpret(f, ref, dims);
    EXPECT_EQ(k.run_dims(args, dims, pool), 0);
    for (size_t p = num_inputs; p < args.size(); ++p)
        // FMA contraction (compile_driver.h) differs from the interpreter by roundings: a
        // cancelling sum needs an absolute bound.
        EXPECT_TRUE(all_close(args[p], ref[p], rtol, rtol == 0 ? 0 : 1e-4)) << f.name << " param " << p << " dims[0]=" << dims[0];
    return args;
}

TEST(SymbolicKernel, BiasAddOneKernelManySizes) {
    Var n = te::make_dim("n");
    tir::PrimFunc f = symtest::bias_add(n, c(384), "sym_bias_add").func;
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("const int64_t* dims"), std::string::npos);
    // The main part's inner loop keeps its constant extent and its vectorization hint; the
    // parallel loop's extent is computed from n at run time.
    EXPECT_NE(k.source.find("#pragma GCC ivdep\n                for (int64_t i1_i = 0; i1_i < 16LL; ++i1_i)"),
              std::string::npos)
        << k.source;
    // n is a checked dim (>= 0): its floordiv by a positive constant is C's division (no
    // helper whose selects would keep GCC from vectorizing a loop they land in).
    EXPECT_NE(k.source.find("env->parallel_for(env->pool, (n / 4LL)"), std::string::npos) << k.source;
    EXPECT_EQ(k.source.find("kiln_floordiv_i64(n"), std::string::npos);
    runtime::ThreadPool pool(2);
    for (int64_t rows : {1, 3, 4, 9, 130}) {
        auto args = run_both(k, f, {rows}, 2, 0, rows % 2 ? &pool : nullptr);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t h = 0; h < 384; h += 37)
                ASSERT_EQ(args[2].get_f64(r * 384 + h), static_cast<float>(args[0].get_f64(r * 384 + h) + args[1].get_f64(h)));
    }
}

TEST(SymbolicKernel, SoftmaxBothDimsSymbolic) {
    Var n = te::make_dim("n"), m = te::make_dim("m");
    tir::PrimFunc f = symtest::softmax(n, m, "sym_softmax").func;
    LoadedKernel k = compile_func(f);
    runtime::ThreadPool pool(2);
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 16}, {3, 17}, {8, 100}, {33, 7}}) {
        auto args = run_both(k, f, {rows, cols}, 1, 1e-5, &pool);
        for (int64_t r = 0; r < rows; ++r) {  // naive reference, in double
            double mx = -INFINITY, s = 0;
            for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, args[0].get_f64(r * cols + j));
            for (int64_t j = 0; j < cols; ++j) s += std::exp(args[0].get_f64(r * cols + j) - mx);
            for (int64_t j = 0; j < cols; ++j)
                ASSERT_NEAR(args[1].get_f64(r * cols + j), std::exp(args[0].get_f64(r * cols + j) - mx) / s, 1e-5);
        }
    }
}

TEST(SymbolicKernel, SymbolicReduceExtent) {
    Var n = te::make_dim("n");
    tir::PrimFunc f = symtest::column_sum(n, c(80), "sym_colsum").func;
    LoadedKernel k = compile_func(f);
    for (int64_t rows : {0, 1, 5, 8, 203}) {
        auto args = run_both(k, f, {rows}, 1, 1e-5, nullptr);
        for (int64_t h = 0; h < 80; ++h) {
            double s = 0;
            for (int64_t r = 0; r < rows; ++r) s += args[0].get_f64(r * 80 + h);
            ASSERT_NEAR(args[1].get_f64(h), s, 1e-4) << "rows=" << rows << " h=" << h;
        }
    }
}

TEST(SymbolicKernel, TiledMatmulSymbolicRows) {
    Var m = te::make_dim("m");
    const int64_t K = 64, N = 96;
    tir::PrimFunc f = symtest::matmul(m, c(K), c(N), 6, 32, "sym_matmul").func;
    LoadedKernel k = compile_func(f);
    runtime::ThreadPool pool(2);
    for (int64_t rows : {1, 5, 6, 13, 48}) {
        auto args = run_both(k, f, {rows}, 2, 1e-5, rows > 6 ? &pool : nullptr);
        for (int64_t i = 0; i < rows; i += 2)
            for (int64_t j = 0; j < N; j += 5) {
                double s = 0;
                for (int64_t r = 0; r < K; ++r) s += args[0].get_f64(i * K + r) * args[1].get_f64(r * N + j);
                ASSERT_NEAR(args[2].get_f64(i * N + j), s, 1e-4) << i << "," << j;
            }
        // The static kernel of the same definition and schedule gives the same values.
        tir::PrimFunc sf = symtest::matmul(c(rows), c(K), c(N), 6, 32, "static_matmul").func;
        std::vector<kiln::Tensor> sargs = {args[0], args[1], kiln::Tensor(DType::kFloat32, {rows, N})};
        ASSERT_EQ(compile_func(sf).run(sargs), 0);
        EXPECT_TRUE(all_close(sargs[2], args[2], 1e-6, 1e-6)) << rows;
    }
}

TEST(SymbolicKernel, MatmulWithEveryDimSymbolic) {
    Var m = te::make_dim("m"), kd = te::make_dim("k"), n = te::make_dim("n");
    tir::PrimFunc f = symtest::matmul(m, kd, n, 4, 16, "sym_matmul_mkn").func;
    LoadedKernel k = compile_func(f);
    runtime::ThreadPool pool(2);
    for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {5, 7, 33}, {8, 16, 32}, {9, 0, 17}})
        run_both(k, f, {M, K, N}, 2, 1e-5, &pool);
}

TEST(SymbolicKernel, NegativeDimIsRefusedBeforeAnyAccess) {
    Var n = te::make_dim("n"), m = te::make_dim("m");
    tir::PrimFunc f = symtest::softmax(n, m, "sym_softmax_bad").func;
    LoadedKernel k = compile_func(f);
    std::vector<kiln::Tensor> args = {kiln::Tensor(DType::kFloat32, {1}), kiln::Tensor(DType::kFloat32, {1})};
    EXPECT_EQ(k.run_dims(args, {-3, 4}), KILN_KERNEL_BAD_DIMS);
    EXPECT_EQ(k.run_dims(args, {2, -1}), KILN_KERNEL_BAD_DIMS);
    // The host-side check names the problem for a dim the buffers cannot hold.
    try {
        tir::check_call(f, {2, 4}, {1, 1});
        ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("argument 0 ('X') expected 8 elements for these dims, got 1"),
                  std::string::npos)
            << e.what();
    }
}

TEST(SymbolicKernel, DimNamesThatClashWithTheAbiAreRenamed) {
    Var a = te::make_dim("dims"), b = te::make_dim("env");
    te::Tensor x = te::sym_placeholder({a, b}, DType::kFloat32, "args");
    te::Tensor y = te::sym_compute({a, b}, [&](const std::vector<Var>& i) { return te::read(x, i) + te::float_imm(1); }, "Y");
    te::Schedule s = te::create_schedule({y});
    auto [o, i] = s[y].split(s[y].fuse(s[y].axis(0), s[y].axis(1)), 8);
    s[y].parallel(o);
    s[y].vectorize(i);
    tir::PrimFunc f = tir::simplify(tir::lower(s, {x, y}, "clash"));
    LoadedKernel k = compile_func(f);
    runtime::ThreadPool pool(2);
    for (auto [d0, d1] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {4, 8}, {9, 13}})
        run_both(k, f, {d0, d1}, 1, 0, &pool);
}

// The fused parallel index of a blocked-to-plain conversion is divided by the run-time h (and
// the quotient by 2) once per iteration of that loop, into locals ahead of the w and channel
// loops, never per element (a 64-bit division per element: 33x the static kernel).
TEST(SymbolicKernel, DivisionsByDimsAreComputedOncePerOuterIteration) {
    Var n = te::make_dim("n"), h = te::make_dim("h"), w = te::make_dim("w");
    tir::PrimFunc f = symtest::from_blocked(n, h, w, "sym_from_blocked").func;
    LoadedKernel k = compile_func(f);
    const size_t q0 = k.source.find("const int64_t kiln_q0 = kiln_floordiv_i64(");
    ASSERT_NE(q0, std::string::npos) << k.source;
    const size_t inner = k.source.find("/* vectorized */");
    ASSERT_NE(inner, std::string::npos);
    EXPECT_LT(q0, inner);
    EXPECT_EQ(k.source.find("kiln_floordiv_i64(", inner), std::string::npos) << k.source;
    EXPECT_EQ(k.source.find("kiln_floormod_i64(", inner), std::string::npos) << k.source;
    runtime::ThreadPool pool(2);
    for (auto [nn, hh, ww] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 3, 17}, {1, 7, 32}, {3, 5, 40}, {0, 4, 4}})
        run_both(k, f, {nn, hh, ww}, 1, 0, hh % 2 ? &pool : nullptr);
}

TEST(SymbolicKernel, StaticKernelsKeepTheirAbi) {
    tir::PrimFunc f = symtest::bias_add(c(5), c(16), "static_bias_add").func;
    EXPECT_TRUE(f.dims.empty());
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("static_bias_add(void* const* args, const kiln_kernel_env* env)"), std::string::npos);
    std::vector<kiln::Tensor> args = {random_tensor({5, 16}, 1), random_tensor({16}, 2), kiln::Tensor(DType::kFloat32, {5, 16})};
    ASSERT_EQ(k.run(args), 0);
    for (int64_t i = 0; i < 80; ++i)
        ASSERT_EQ(args[2].get_f64(i), static_cast<float>(args[0].get_f64(i) + args[1].get_f64(i % 16)));
}

}  // namespace
}  // namespace kiln::codegen
