// Software prefetch (te::Stage::prefetch -> tir::PrefetchNode -> __builtin_prefetch): where
// lowering puts it, what the C emitter writes, that the compiled kernel computes what the tir
// interpreter (which skips the hint) and a naive loop compute, with an index that runs past the
// buffer too, and the errors for a misplaced prefetch.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "codegen/c_emitter.h"
#include "kernel_test_util.h"
#include "te/schedule.h"
#include "te/tensor.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::codegen {
namespace {

using namespace kiln::codegen::testing;
using te::Expr;
using te::IterVar;
using te::Var;

/// C[M, N] = A[M, K] x B[K, N], rows split by 4 with the tile accumulated locally; in every k
/// step B's row k + ahead is prefetched (past the last row for the last `ahead` steps).
struct PrefetchedMatmul {
    static constexpr int64_t M = 10, N = 24, K = 37;
    te::Tensor A, B, C;
    tir::PrimFunc f;
    explicit PrefetchedMatmul(int64_t ahead) {
        A = te::placeholder({M, K}, DType::kFloat32, "A");
        B = te::placeholder({K, N}, DType::kFloat32, "B");
        IterVar r = te::reduce_axis(K, "k");
        C = te::compute(
            {M, N},
            [&](const std::vector<Var>& i) {
                return te::sum(te::read(A, {te::ex(i[0]), te::ex(r->var)}) * te::read(B, {te::ex(r->var), te::ex(i[1])}),
                               {r});
            },
            "C");
        te::Schedule s = te::create_schedule({C});
        te::Stage& st = s[C];
        auto [io, ii] = st.split(st.axis(0), 4);
        st.reorder({io, st.axis(1), r, ii});
        st.cache_write_local();
        st.prefetch(B, r, {Expr(r->var) + te::int_imm(ahead), te::int_imm(0)});
        f = tir::lower(s, {A, B, C}, "mm_prefetch");
    }
};

TEST(Prefetch, LoweredAtTheTopOfItsLoopAndEmittedAsAHint) {
    PrefetchedMatmul mm(2);
    const std::string ir = tir::func_str(mm.f);
    const size_t loop = ir.find("for k in 0..37"), hint = ir.find("prefetch B[");
    ASSERT_NE(loop, std::string::npos) << ir;
    ASSERT_NE(hint, std::string::npos) << ir;
    EXPECT_LT(loop, hint) << ir;
    EXPECT_EQ(ir.find("for", loop + 1) > hint, true) << "the hint comes before the k loop's inner loops:\n" << ir;
    const std::string src = emit_c(mm.f);
    EXPECT_NE(src.find("__builtin_prefetch(&B["), std::string::npos) << src;
    // Simplification keeps it (it rewrites its index like a store's).
    EXPECT_NE(tir::func_str(tir::simplify(mm.f)).find("prefetch B["), std::string::npos);
}

TEST(Prefetch, CompiledKernelMatchesTheInterpreterAndANaiveLoopEvenPastTheBuffer) {
    for (int64_t ahead : {1, 5}) {  // the last `ahead` k steps prefetch past B's end
        PrefetchedMatmul mm(ahead);
        LoadedKernel k = compile_func(mm.f);
        std::mt19937 rng(static_cast<unsigned>(ahead));
        std::uniform_real_distribution<double> u(-1, 1);
        auto args = make_args(mm.f, [&](size_t p, int64_t) { return p < 2 ? u(rng) : 0.0; });
        std::vector<Tensor> ref = clone_all(args);
        ASSERT_EQ(k.run(args), 0);
        tir::interpret(mm.f, ref);
        const float* a = args[0].data_as<float>();
        const float* b = args[1].data_as<float>();
        for (int64_t i = 0; i < PrefetchedMatmul::M; ++i)
            for (int64_t j = 0; j < PrefetchedMatmul::N; ++j) {
                double want = 0;
                for (int64_t q = 0; q < PrefetchedMatmul::K; ++q)
                    want += double(a[i * PrefetchedMatmul::K + q]) * b[q * PrefetchedMatmul::N + j];
                const int64_t at = i * PrefetchedMatmul::N + j;
                ASSERT_NEAR(args[2].data_as<float>()[at], want, 1e-4) << "ahead " << ahead << " at " << i << "," << j;
                // (FMA contraction in the compiled kernel: not bit for bit)
                ASSERT_NEAR(args[2].data_as<float>()[at], ref[2].data_as<float>()[at], 1e-5) << "against the interpreter";
            }
    }
}

TEST(Prefetch, AtALoopOfAnotherStageOrWithTheWrongIndexCountIsAnError) {
    te::Tensor A = te::placeholder({8, 8}, DType::kFloat32, "A");
    te::Tensor B = te::compute(
        {8, 8}, [&](const std::vector<Var>& i) { return te::read(A, {te::ex(i[0]), te::ex(i[1])}) * te::make_const(DType::kFloat32, 2); },
        "B");
    te::Schedule s = te::create_schedule({B});
    te::Stage& st = s[B];
    auto [o, i] = st.split(st.axis(1), 4);
    EXPECT_THROW(st.prefetch(A, st.axis(1), {Expr(o->var), Expr(i->var)}), kiln::Error);  // split away: not a loop
    EXPECT_THROW(st.prefetch(A, o, {Expr(o->var)}), kiln::Error);                         // A has two dims
    EXPECT_NO_THROW(st.prefetch(A, o, {te::ex(st.axis(0)->var), Expr(o->var) * te::int_imm(4)}));
    // A loop split after the prefetch named it: lowering says so.
    st.split(o, 2);
    EXPECT_THROW(tir::lower(s, {A, B}, "moved"), kiln::Error);
}

}  // namespace
}  // namespace kiln::codegen
