// Parallel loops (outlined tasks run on the runtime pool), kernel-local Allocate, and the
// oracle test: scheduled TE lowered to tir, compiled, and compared with tir::interpret.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "kernel_test_util.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::BinaryOp;
using te::Expr;
using te::LoopKind;
using tir::PrimFunc;

Expr load(const te::Buffer& b, Expr idx) {
    return std::make_shared<te::BufferLoadNode>(te::compute_dtype(b->dtype), b, std::move(idx));
}
Expr i64(int64_t v) { return std::make_shared<te::IntImmNode>(DType::kInt64, v); }
Expr f32(double v) { return std::make_shared<te::FloatImmNode>(DType::kFloat32, v); }
Expr bin(BinaryOp op, Expr a, Expr b) { return std::make_shared<te::BinaryNode>(a->dtype, op, a, b); }

// out[b, i, j] = A[b, i, j] * scale[b] + j, with loops (b serial, i parallel, j vectorized) and
// an inner "parallel" loop nested in the task (must run serially), plus a per-row scratch
// buffer allocated inside the task.
PrimFunc nested_parallel_func() {
    const int64_t nb = 3, ni = 37, nj = 19;
    auto A = te::make_buffer("A", DType::kFloat32, {nb, ni, nj});
    auto S = te::make_buffer("scale", DType::kFloat32, {nb});
    auto O = te::make_buffer("out", DType::kFloat32, {nb, ni, nj});
    auto T = te::make_buffer("row", DType::kFloat32, {nj});
    te::Var b = te::make_var("b"), i = te::make_var("i"), j = te::make_var("j"), j2 = te::make_var("j");
    auto idx = [&](Expr jj) {
        return bin(BinaryOp::kAdd, bin(BinaryOp::kMul, bin(BinaryOp::kAdd, bin(BinaryOp::kMul, b, i64(ni)), i), i64(nj)), jj);
    };
    tir::Stmt fill = tir::make_for(j, i64(nj), LoopKind::kParallel,  // nested in the task: serial
                                   tir::make_store(T, j, bin(BinaryOp::kMul, load(A, idx(j)), load(S, b))));
    tir::Stmt use = tir::make_for(j2, i64(nj), LoopKind::kVectorized,
                                  tir::make_store(O, idx(j2), bin(BinaryOp::kAdd, load(T, j2), std::make_shared<te::CastNode>(DType::kFloat32, j2))));
    tir::Stmt body = tir::make_for(
        b, i64(nb), LoopKind::kSerial,
        tir::make_for(i, i64(ni), LoopKind::kParallel, tir::make_allocate(T, tir::make_seq({fill, use}))));
    return PrimFunc{"nested_par", {A, S, O}, body};
}

TEST(ParallelKernel, OneAndFourThreadsAgreeWithNaiveLoop) {
    PrimFunc f = nested_parallel_func();
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("nested_par_task0"), std::string::npos) << k.source;
    EXPECT_EQ(k.source.find("nested_par_task1"), std::string::npos) << "nested parallel loop was outlined";
    EXPECT_NE(k.source.find("env->parallel_for(env->pool"), std::string::npos);
    auto fill = [](size_t p, int64_t e) { return p == 0 ? std::sin(e * 0.37) : p == 1 ? 1.5 + e : 0.0; };
    auto args1 = make_args(f, fill);
    auto args4 = make_args(f, fill);
    auto args0 = make_args(f, fill);
    runtime::ThreadPool pool1(1), pool4(4);
    ASSERT_EQ(k.run(args1, &pool1), 0);
    ASSERT_EQ(k.run(args4, &pool4), 0);
    ASSERT_EQ(k.run(args0, nullptr), 0);  // no env: tasks run inline
    EXPECT_TRUE(bits_equal(args1[2], args4[2]));
    EXPECT_TRUE(bits_equal(args1[2], args0[2]));
    const float* A = args1[0].data_as<float>();
    const float* S = args1[1].data_as<float>();
    for (int64_t b = 0; b < 3; ++b)
        for (int64_t i = 0; i < 37; ++i)
            for (int64_t j = 0; j < 19; ++j) {
                int64_t e = (b * 37 + i) * 19 + j;
                // Kernels compile with FMA contraction: a*b+c rounds once, so compare within
                // an ulp or two of float rather than bit for bit.
                const double want = static_cast<double>(A[e]) * S[b] + static_cast<double>(j);
                ASSERT_NEAR(args4[2].data_as<float>()[e], want, 2.5e-7 * std::fabs(want) + 1e-7) << e;
            }
    auto ref = make_args(f, fill);
    tir::interpret(f, ref);
    EXPECT_TRUE(all_close(args4[2], ref[2], 2.5e-7, 1e-7));
}

TEST(ParallelKernel, TopLevelAllocateTwoStage) {
    // T = exp(A) (kernel-local), out = T[i] + T[n-1-i].
    const int64_t n = 1000;
    auto A = te::make_buffer("A", DType::kFloat32, {n});
    auto O = te::make_buffer("O", DType::kFloat32, {n});
    auto T = te::make_buffer("T", DType::kFloat32, {n});
    te::Var i = te::make_var("i"), k2 = te::make_var("k");
    tir::Stmt s1 = tir::make_for(i, i64(n), LoopKind::kParallel,
                                 tir::make_store(T, i, std::make_shared<te::UnaryNode>(DType::kFloat32, te::UnaryOp::kExp, load(A, i))));
    tir::Stmt s2 = tir::make_for(k2, i64(n), LoopKind::kVectorized,
                                 tir::make_store(O, k2, bin(BinaryOp::kAdd, load(T, k2), load(T, bin(BinaryOp::kSub, i64(n - 1), k2)))));
    PrimFunc f{"two_stage", {A, O}, tir::make_allocate(T, tir::make_seq({s1, s2}))};
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("kiln_alloc(4000)"), std::string::npos) << k.source;
    auto args = make_args(f, [](size_t p, int64_t e) { return p == 0 ? e * 0.01 - 5 : 0.0; });
    runtime::ThreadPool pool(4);
    ASSERT_EQ(k.run(args, &pool), 0);
    for (int64_t e = 0; e < n; ++e) {
        float want = std::exp(float(e * 0.01 - 5)) + std::exp(float((n - 1 - e) * 0.01 - 5));
        ASSERT_NEAR(args[1].data_as<float>()[e], want, std::fabs(want) * 1e-6) << e;
    }
}

TEST(ParallelKernel, FailedAllocationReturnsOneAtTopLevelAndInTasks) {
    auto O = te::make_buffer("O", DType::kFloat32, {8});
    auto Huge = te::make_buffer("huge", DType::kFloat32, {int64_t(1) << 58});  // 2^60 bytes
    auto Small = te::make_buffer("small", DType::kFloat32, {4});
    te::Var i = te::make_var("i");
    tir::Stmt use = tir::make_seq({tir::make_store(Huge, i64(0), f32(1)), tir::make_store(O, i, load(Huge, i64(0)))});
    // Top level: small holds memory when huge fails (both must be released; ASan would tell).
    PrimFunc top{"alloc_fail_top", {O},
                 tir::make_allocate(Small, tir::make_allocate(Huge, tir::make_for(i, i64(8), LoopKind::kSerial, use)))};
    // In a task.
    te::Var j = te::make_var("j");
    tir::Stmt use2 = tir::make_seq({tir::make_store(Huge, i64(0), f32(1)), tir::make_store(O, j, load(Huge, i64(0)))});
    PrimFunc task{"alloc_fail_task", {O}, tir::make_for(j, i64(8), LoopKind::kParallel, tir::make_allocate(Huge, use2))};
    runtime::ThreadPool pool(2);
    for (const PrimFunc& f : {top, task}) {
        LoadedKernel k = compile_func(f);
        std::vector<Tensor> args = {Tensor(DType::kFloat32, {8})};
        EXPECT_EQ(k.run(args, &pool), 1) << k.source;
    }
}

// ---- the oracle: lowered TE vs the interpreter ----

// Compiled kernels use FMA contraction (the interpreter rounds every operation), so floats
// compare within rtol/atol; rtol == 0 asks for bit equality (integer kernels).
void check_against_interpreter(const te::Schedule& s, const std::vector<te::Tensor>& params, const std::string& name,
                               double rtol, double atol = 1e-30) {
    PrimFunc f = tir::simplify(tir::lower(s, params, name));
    LoadedKernel k = compile_func(f);
    auto fill = [](size_t p, int64_t e) { return std::cos(e * 0.731 + p) * (1 + p); };
    auto got1 = make_args(f, fill);
    auto got4 = make_args(f, fill);
    auto ref = make_args(f, fill);
    runtime::ThreadPool pool1(1), pool4(4);
    ASSERT_EQ(k.run(got1, &pool1), 0);
    ASSERT_EQ(k.run(got4, &pool4), 0);
    tir::interpret(f, ref);
    for (size_t p = 0; p < f.params.size(); ++p) {
        EXPECT_TRUE(bits_equal(got1[p], got4[p])) << name << " param " << p;
        if (rtol == 0)
            EXPECT_TRUE(bits_equal(got4[p], ref[p])) << name << " param " << p << "\n" << tir::func_str(f);
        else
            EXPECT_TRUE(all_close(got4[p], ref[p], rtol, atol)) << name << " param " << p;
    }
}

/// The dynamic symbols `path` defines (nm -D --defined-only).
std::set<std::string> exported_symbols(const std::string& path) {
    std::set<std::string> out;
    FILE* p = popen(("nm -D --defined-only '" + path + "'").c_str(), "r");
    if (!p) return out;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
        std::istringstream is(line);
        std::string addr, type, name;
        if (is >> addr >> type >> name) out.insert(name);
    }
    pclose(p);
    return out;
}

// Two emitted kernels (the same prelude, parallel tasks and kernel-local buffers) in one library
// (a compiled artifact's form): the link sees no duplicate symbol, the library exports exactly
// the two kernels, and each computes what the same kernel compiled alone computes.
TEST(KernelLibrary, EmittedKernelsLinkIntoOneLibraryAndAgreeWithSeparateBuilds) {
    PrimFunc par = nested_parallel_func();
    const int64_t M = 9, K = 7, N = 20;
    te::Tensor A = te::placeholder({M, K}, DType::kFloat32, "A");
    te::Tensor B = te::placeholder({K, N}, DType::kFloat32, "B");
    te::IterVar r = te::reduce_axis(K, "r");
    te::Tensor C = te::compute({M, N}, [&](const std::vector<te::Var>& i) {
        return te::sum(te::read(A, {te::ex(i[0]), te::ex(r->var)}) * te::read(B, {te::ex(r->var), te::ex(i[1])}), {r});
    }, "C");
    te::Schedule s = te::create_schedule({C});
    te::Stage& st = s[C];
    auto [io, ii] = st.split(st.axis(0), 4);
    st.reorder({io, st.axis(1), st.reduce_axis(0), ii});
    st.parallel(io);
    st.cache_write_local();
    PrimFunc mm = tir::simplify(tir::lower(s, {A, B, C}, "kiln_kernel"));
    PrimFunc par_k = par;
    par_k.name = "kiln_kernel";
    std::vector<PrimFunc> funcs = {par_k, mm};
    std::vector<std::string> sources = {emit_c(par_k), emit_c(mm)};
    KernelLibrary lib = compile_c_library(sources, 2);
    EXPECT_EQ(exported_symbols(lib.path), std::set<std::string>(lib.symbols.begin(), lib.symbols.end()));

    auto exe = std::make_shared<runtime::Executable>();
    for (size_t i = 0; i < funcs.size(); ++i) exe->kernels.push_back({lib.path, lib.symbols[i], "k" + std::to_string(i)});
    exe->load();
    runtime::ThreadPool pool(2);
    kiln_kernel_env env = pool.kernel_env();
    for (size_t i = 0; i < funcs.size(); ++i) {
        auto fill = [](size_t p, int64_t e) { return std::sin(e * 0.37 + p) * (1 + p); };
        std::vector<Tensor> got = make_args(funcs[i], fill), want = make_args(funcs[i], fill);
        std::vector<void*> ptrs;
        for (auto& t : got) ptrs.push_back(t.data());
        ASSERT_EQ(exe->kernel_fn(static_cast<int>(i))(ptrs.data(), &env), 0);
        PrimFunc alone = funcs[i];
        alone.name = "alone_" + std::to_string(i);
        ASSERT_EQ(compile_func(alone).run(want, &pool), 0);
        const size_t out = funcs[i].params.size() - 1;
        EXPECT_TRUE(bits_equal(got[out], want[out])) << "kernel " << i;
    }
}

TEST(LoweredKernel, ScheduledMatmulMatchesInterpreter) {
    const int64_t M = 45, K = 33, N = 70;  // factors below do not divide: tail guards
    te::Tensor A = te::placeholder({M, K}, DType::kFloat32, "A");
    te::Tensor B = te::placeholder({K, N}, DType::kFloat32, "B");
    te::IterVar r = te::reduce_axis(K, "r");
    te::Tensor C = te::compute({M, N}, [&](const std::vector<te::Var>& i) {
        return te::sum(te::read(A, {te::ex(i[0]), te::ex(r->var)}) * te::read(B, {te::ex(r->var), te::ex(i[1])}), {r});
    }, "C");
    te::Schedule s = te::create_schedule({C});
    te::Stage& st = s[C];
    auto [io, ii] = st.split(st.axis(0), 8);
    auto [jo, ji] = st.split(st.axis(1), 16);
    st.reorder({io, jo, st.reduce_axis(0), ii, ji});
    st.parallel(io);
    st.vectorize(ji);
    st.unroll(ii);
    // Serial float sums in the same order, but each step may be one FMA: |error| within a few
    // float roundings of the sum of |a*b| (inputs are |x| <= 2, K = 33).
    check_against_interpreter(s, {A, B, C}, "matmul_sched", 1e-5, 1e-4);
}

// The register-tile accumulator (Stage::cache_write_local) with tails on both tile axes and an
// epilogue-free output: the same values as the interpreter of the unscheduled compute.
TEST(LoweredKernel, LocalAccumulatorTileMatchesInterpreter) {
    const int64_t M = 45, K = 33, N = 70;
    te::Tensor A = te::placeholder({M, K}, DType::kFloat32, "A");
    te::Tensor B = te::placeholder({K, N}, DType::kFloat32, "B");
    te::IterVar r = te::reduce_axis(K, "r");
    te::Tensor C = te::compute({M, N}, [&](const std::vector<te::Var>& i) {
        return te::sum(te::read(A, {te::ex(i[0]), te::ex(r->var)}) * te::read(B, {te::ex(r->var), te::ex(i[1])}), {r});
    }, "C");
    te::Schedule s = te::create_schedule({C});
    te::Stage& st = s[C];
    auto [io, ii] = st.split(st.axis(0), 4);
    auto [jo, ji] = st.split(st.axis(1), 32);
    st.reorder({jo, io, st.reduce_axis(0), ii, ji});
    st.parallel(jo);
    st.unroll(ii);
    st.vectorize(ji);
    st.cache_write_local();
    PrimFunc f = tir::simplify(tir::lower(s, {A, B, C}, "local_tile"));
    const std::string text = tir::func_str(f);
    EXPECT_NE(text.find("local C_local"), std::string::npos) << text;
    LoadedKernel k = compile_func(f);
    EXPECT_NE(k.source.find("C_local[128] __attribute__((aligned(64)))"), std::string::npos) << k.source;
    check_against_interpreter(s, {A, B, C}, "local_tile", 1e-5, 1e-4);
    // Independent of lowering: the unscheduled compute through the interpreter.
    te::Schedule plain = te::create_schedule({C});
    PrimFunc g = tir::lower(plain, {A, B, C}, "plain");
    auto fill = [](size_t p, int64_t e) { return std::cos(e * 0.731 + p) * (1 + p); };
    auto got = make_args(f, fill), want = make_args(g, fill);
    runtime::ThreadPool pool(2);
    ASSERT_EQ(k.run(got, &pool), 0);
    tir::interpret(g, want);
    EXPECT_TRUE(all_close(got[2], want[2], 1e-5, 1e-4));
}

TEST(LoweredKernel, SoftmaxMultiStageWithAllocateMatchesInterpreter) {
    const int64_t R = 13, L = 50;
    te::Tensor X = te::placeholder({R, L}, DType::kFloat32, "X");
    te::IterVar k1 = te::reduce_axis(L, "k1");
    te::Tensor mx = te::compute({R}, [&](const std::vector<te::Var>& i) {
        return te::max_reduce(te::read(X, {te::ex(i[0]), te::ex(k1->var)}), {k1});
    }, "rowmax");
    te::Tensor ex = te::compute({R, L}, [&](const std::vector<te::Var>& i) {
        return te::unary(te::UnaryOp::kExp, te::read(X, i) - te::read(mx, {te::ex(i[0])}));
    }, "expd");
    te::IterVar k2 = te::reduce_axis(L, "k2");
    te::Tensor sm = te::compute({R}, [&](const std::vector<te::Var>& i) {
        return te::sum(te::read(ex, {te::ex(i[0]), te::ex(k2->var)}), {k2});
    }, "rowsum");
    te::Tensor Y = te::compute({R, L}, [&](const std::vector<te::Var>& i) {
        return te::read(ex, i) / te::read(sm, {te::ex(i[0])});
    }, "Y");
    te::Schedule s = te::create_schedule({Y});
    s[Y].parallel(s[Y].axis(0));
    s[Y].vectorize(s[Y].axis(1));
    s[ex].parallel(s[ex].axis(0));
    PrimFunc f = tir::lower(s, {X, Y}, "softmax_probe");
    EXPECT_NE(tir::func_str(f).find("rowmax"), std::string::npos);
    // exp is libm's expf in C vs exp in double in the interpreter: within an ulp or two.
    check_against_interpreter(s, {X, Y}, "softmax", 1e-6);
    // Independent check: rows sum to one.
    LoadedKernel k = compile_func(tir::simplify(tir::lower(s, {X, Y}, "softmax2")));
    std::vector<Tensor> args = {Tensor(DType::kFloat32, {R, L}), Tensor(DType::kFloat32, {R, L})};
    for (int64_t e = 0; e < R * L; ++e) args[0].set_f64(e, std::sin(e * 1.3) * 4);
    runtime::ThreadPool pool(3);
    ASSERT_EQ(k.run(args, &pool), 0);
    for (int64_t r0 = 0; r0 < R; ++r0) {
        double total = 0, mxv = -1e30, denom = 0;
        for (int64_t c = 0; c < L; ++c) mxv = std::max(mxv, args[0].get_f64(r0 * L + c));
        for (int64_t c = 0; c < L; ++c) denom += std::exp(args[0].get_f64(r0 * L + c) - mxv);
        for (int64_t c = 0; c < L; ++c) {
            double want = std::exp(args[0].get_f64(r0 * L + c) - mxv) / denom;
            EXPECT_NEAR(args[1].get_f64(r0 * L + c), want, 1e-6);
            total += args[1].get_f64(r0 * L + c);
        }
        EXPECT_NEAR(total, 1.0, 1e-5);
    }
}

TEST(LoweredKernel, Float16ElementwiseMatchesInterpreter) {
    te::Tensor A = te::placeholder({257}, DType::kFloat16, "A");
    te::Tensor B = te::placeholder({257}, DType::kFloat16, "B");
    te::Tensor C = te::compute({257}, [&](const std::vector<te::Var>& i) {
        return te::read(A, i) * te::read(B, i) + te::float_imm(0.25);
    }, "C", DType::kFloat16);
    te::Schedule s = te::create_schedule({C});
    auto [o, in] = s[C].split(s[C].axis(0), 32);
    s[C].parallel(o);
    s[C].vectorize(in);
    // f32 a*b+0.25 may be one FMA before the f16 rounding: within an f16 ulp.
    check_against_interpreter(s, {A, B, C}, "f16_fma", 1e-3, 1e-3);
}

}  // namespace
}  // namespace kiln::codegen
