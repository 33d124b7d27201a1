// Schedule primitives never change results: matmul and a two-stage elementwise kernel are
// scheduled with fixed and random combinations of split / split_nparts / fuse / reorder / tile /
// vectorize / unroll / parallel / compute_inline on random (often non-divisible) shapes, lowered,
// interpreted with and without simplify(), and compared with naive C++ loops.
#include "te/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "support/error.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

using namespace kiln;
using te::Expr;
using te::IterVar;
using te::Var;

namespace {

kiln::Tensor random_tensor(Shape shape, std::mt19937& rng) {
    kiln::Tensor x(DType::kFloat32, shape);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
    return x;
}

/// Applies `n` random valid primitives to `st`.
void random_schedule(te::Stage& st, std::mt19937& rng, int n) {
    for (int step = 0; step < n; ++step) {
        const auto leaves = st.leaf_iter_vars();
        if (leaves.empty()) return;
        IterVar iv = leaves[rng() % leaves.size()];
        switch (rng() % 6) {
            case 0: st.split(iv, 1 + static_cast<int64_t>(rng() % 6)); break;
            case 1: st.split_nparts(iv, 1 + static_cast<int64_t>(rng() % 4)); break;
            case 2: {
                size_t p = rng() % leaves.size();
                if (p + 1 < leaves.size() && leaves[p]->is_reduce == leaves[p + 1]->is_reduce)
                    st.fuse(leaves[p], leaves[p + 1]);
                break;
            }
            case 3: {
                auto perm = leaves;
                std::shuffle(perm.begin(), perm.end(), rng);
                st.reorder(perm);
                break;
            }
            case 4: {
                int k = static_cast<int>(rng() % 3);
                if (k == 0 && !iv->is_reduce) st.vectorize(iv);
                if (k == 1) st.unroll(iv);
                if (k == 2 && !iv->is_reduce) st.parallel(iv);
                break;
            }
            default: {
                if (leaves.size() >= 2) {
                    size_t p = rng() % (leaves.size() - 1);
                    st.tile(leaves[p], leaves[p + 1], 1 + static_cast<int64_t>(rng() % 5),
                            1 + static_cast<int64_t>(rng() % 5));
                }
                break;
            }
        }
    }
}

struct Matmul {
    int64_t M, N, K;
    te::Tensor A, B, C;
    Matmul(int64_t m, int64_t n, int64_t k) : M(m), N(n), K(k) {
        A = te::placeholder({M, K}, DType::kFloat32, "A");
        B = te::placeholder({K, N}, DType::kFloat32, "B");
        IterVar r = te::reduce_axis(K, "k");
        C = te::compute(
            {M, N},
            [&](const std::vector<Var>& i) {
                return te::sum(te::read(A, {te::ex(i[0]), te::ex(r->var)}) *
                                   te::read(B, {te::ex(r->var), te::ex(i[1])}),
                               {r});
            },
            "C");
    }
    /// Runs f (and simplify(f)) and checks against the naive loop.
    void check(const tir::PrimFunc& f, std::mt19937& rng, const std::string& what) const {
        kiln::Tensor a = random_tensor({M, K}, rng), b = random_tensor({K, N}, rng);
        std::vector<double> ref(static_cast<size_t>(M * N), 0.0);
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j)
                for (int64_t k = 0; k < K; ++k)
                    ref[i * N + j] += static_cast<double>(a.data_as<float>()[i * K + k]) *
                                      b.data_as<float>()[k * N + j];
        const tir::PrimFunc fs = tir::simplify(f);
        std::vector<kiln::Tensor> out;
        for (const tir::PrimFunc* g : {&f, &fs}) {
            std::vector<kiln::Tensor> args = {a, b, random_tensor({M, N}, rng)};
            tir::interpret(*g, args);
            for (int64_t i = 0; i < M * N; ++i) {
                ASSERT_NEAR(args[2].data_as<float>()[i], ref[i], 1e-4)
                    << what << " element " << i << "\n"
                    << tir::func_str(*g);
            }
            out.push_back(args[2]);
        }
        // simplify() must not change a single bit.
        EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].nbytes()), 0) << what;
    }
};

struct Elementwise {
    int64_t R, C;
    te::Tensor A, B, T, Out;
    Elementwise(int64_t r, int64_t c) : R(r), C(c) {
        A = te::placeholder({R, C}, DType::kFloat32, "A");
        B = te::placeholder({C}, DType::kFloat32, "B");
        T = te::compute(
            {R, C},
            [&](const std::vector<Var>& i) {
                return te::read(A, i) * te::read(B, {te::ex(i[1])}) + te::float_imm(0.5);
            },
            "T");
        Out = te::compute(
            {R, C},
            [&](const std::vector<Var>& i) {
                return te::unary(te::UnaryOp::kTanh, te::read(T, i)) - te::read(A, i);
            },
            "Out");
    }
    void check(const tir::PrimFunc& f, std::mt19937& rng, const std::string& what) const {
        kiln::Tensor a = random_tensor({R, C}, rng), b = random_tensor({C}, rng);
        const tir::PrimFunc fs = tir::simplify(f);
        for (const tir::PrimFunc* g : {&f, &fs}) {
            std::vector<kiln::Tensor> args = {a, b, random_tensor({R, C}, rng)};
            tir::interpret(*g, args);
            for (int64_t i = 0; i < R; ++i)
                for (int64_t j = 0; j < C; ++j) {
                    float t = a.data_as<float>()[i * C + j] * b.data_as<float>()[j] + 0.5f;
                    float ref = static_cast<float>(std::tanh(static_cast<double>(t))) -
                                a.data_as<float>()[i * C + j];
                    ASSERT_FLOAT_EQ(args[2].data_as<float>()[i * C + j], ref) << what << "\n"
                                                                              << tir::func_str(*g);
                }
        }
    }
};

}  // namespace

TEST(ScheduleEquivalence, MatmulFixedSchedules) {
    std::mt19937 rng(42);
    const int64_t shapes[][3] = {{8, 8, 8}, {7, 5, 13}, {1, 9, 3}, {16, 3, 1}, {5, 1, 6}};
    for (auto& sh : shapes) {
        Matmul mm(sh[0], sh[1], sh[2]);
        for (int variant = 0; variant < 8; ++variant) {
            te::Schedule s = te::create_schedule({mm.C});
            te::Stage& st = s[mm.C];
            IterVar i = st.axis(0), j = st.axis(1), k = st.reduce_axis(0);
            switch (variant) {
                case 0: break;
                case 1: {
                    auto [io, ii] = st.split(i, 4);
                    st.vectorize(ii);
                    st.parallel(io);
                    break;
                }
                case 2: {
                    auto t = st.tile(i, j, 4, 3);
                    auto [ko, ki] = st.split(k, 4);
                    st.reorder({t[0], t[1], ko, t[2], ki, t[3]});  // dp leaves inside reduce leaves
                    st.parallel(t[0]);
                    st.vectorize(t[3]);
                    break;
                }
                case 3: st.reorder({k, i, j}); break;
                case 4: {
                    IterVar f = st.fuse(i, j);
                    auto [fo, fi] = st.split(f, 5);
                    st.parallel(fo);
                    st.unroll(fi);
                    break;
                }
                case 5: {
                    auto [ko, ki] = st.split(k, 3);
                    IterVar kf = st.fuse(ko, ki);
                    st.unroll(kf);
                    break;
                }
                case 6: {
                    auto [io, ii] = st.split(i, 5);
                    auto [iio, iii] = st.split(ii, 2);  // nested non-divisible split
                    st.reorder({j, io, iio, k, iii});
                    break;
                }
                case 7: {
                    auto [jo, ji] = st.split_nparts(j, 2);
                    st.reorder({jo, k, i, ji});
                    st.vectorize(ji);
                    break;
                }
            }
            tir::PrimFunc f = tir::lower(s, {mm.A, mm.B, mm.C}, "mm");
            mm.check(f, rng, "variant " + std::to_string(variant));
        }
    }
}

TEST(ScheduleEquivalence, MatmulRandomSchedules) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 250; ++trial) {
        Matmul mm(1 + rng() % 12, 1 + rng() % 12, 1 + rng() % 12);
        te::Schedule s = te::create_schedule({mm.C});
        random_schedule(s[mm.C], rng, 1 + static_cast<int>(rng() % 6));
        tir::PrimFunc f = tir::lower(s, {mm.A, mm.B, mm.C}, "mm");
        mm.check(f, rng, "trial " + std::to_string(trial));
    }
}

// Random schedules plus a local accumulator tile (Stage::cache_write_local): the data-parallel
// leaves inside the outermost reduce leaf index a local array, initialized before the reduction
// and written once after it; tails (non-dividing splits) must neither drop nor duplicate.
TEST(ScheduleEquivalence, MatmulRandomSchedulesWithLocalAccumulator) {
    std::mt19937 rng(11);
    int tiled = 0;
    for (int trial = 0; trial < 250; ++trial) {
        Matmul mm(1 + rng() % 12, 1 + rng() % 12, 1 + rng() % 12);
        te::Schedule s = te::create_schedule({mm.C});
        te::Stage& st = s[mm.C];
        random_schedule(st, rng, 1 + static_cast<int>(rng() % 6));
        bool inside_reduce = false, parallel_tile = false;
        for (const auto& l : st.leaf_iter_vars()) {
            if (l->is_reduce) inside_reduce = true;
            else if (inside_reduce && st.loop_kind(l) == te::LoopKind::kParallel) parallel_tile = true;
            else if (inside_reduce) ++tiled;
        }
        if (parallel_tile) {
            st.cache_write_local();
            EXPECT_THROW(tir::lower(s, {mm.A, mm.B, mm.C}, "mm"), kiln::Error);
            continue;
        }
        st.cache_write_local();
        tir::PrimFunc f = tir::lower(s, {mm.A, mm.B, mm.C}, "mm");
        EXPECT_NE(tir::func_str(f).find("local C_local"), std::string::npos);
        mm.check(f, rng, "trial " + std::to_string(trial));
    }
    EXPECT_GT(tiled, 50);  // most trials have a real tile, not a scalar accumulator
}

TEST(ScheduleEquivalence, ElementwiseRandomSchedules) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 250; ++trial) {
        Elementwise ew(1 + rng() % 17, 1 + rng() % 17);
        te::Schedule s = te::create_schedule({ew.Out});
        bool inl = rng() % 2;
        if (inl) {
            s[ew.T].compute_inline();
        } else {
            random_schedule(s[ew.T], rng, static_cast<int>(rng() % 4));
        }
        random_schedule(s[ew.Out], rng, 1 + static_cast<int>(rng() % 6));
        tir::PrimFunc f = tir::lower(s, {ew.A, ew.B, ew.Out}, "ew");
        EXPECT_EQ(tir::func_str(f).find("allocate T") != std::string::npos, !inl);
        ew.check(f, rng, "trial " + std::to_string(trial));
    }
}

TEST(ScheduleEquivalence, SimplifyRemovesDivisibleStructure) {
    // A divisible split needs no guard, and simplify() folds the extent-1 loops of a
    // factor-equal-extent split.
    Elementwise ew(8, 16);
    te::Schedule s = te::create_schedule({ew.Out});
    s[ew.T].compute_inline();
    te::Stage& st = s[ew.Out];
    auto [jo, ji] = st.split(st.axis(1), 16);
    st.vectorize(ji);
    tir::PrimFunc f = tir::lower(s, {ew.A, ew.B, ew.Out}, "ew");
    std::string before = tir::func_str(f);
    EXPECT_EQ(before.find("if ("), std::string::npos) << before;
    const tir::PrimFunc fs = tir::simplify(f);
    std::string after = tir::func_str(fs);
    EXPECT_EQ(after.find("i1_o"), std::string::npos) << after;
    EXPECT_NE(after.find("for i1_i in 0..16 vectorized"), std::string::npos) << after;
    std::mt19937 rng(3);
    ew.check(f, rng, "divisible");
}

TEST(ScheduleEquivalence, TailIsPeeledAndGuardFree) {
    // A non-divisible split (the default injective schedule's shape): the main part runs
    // without a guard and simplify() turns the guarded tail into a shorter loop.
    Elementwise ew(3, 10);
    te::Schedule s = te::create_schedule({ew.Out});
    s[ew.T].compute_inline();
    te::Stage& st = s[ew.Out];
    IterVar f = st.fuse(st.axis(0), st.axis(1));
    auto [fo, fi] = st.split(f, 8);  // 30 = 3*8 + 6
    st.parallel(fo);
    st.vectorize(fi);
    tir::PrimFunc fn = tir::lower(s, {ew.A, ew.B, ew.Out}, "ew");
    const tir::PrimFunc fs = tir::simplify(fn);
    std::string text = tir::func_str(fs);
    EXPECT_EQ(text.find("if ("), std::string::npos) << text;
    EXPECT_NE(text.find("for i0_i1_f_o in 0..3 parallel"), std::string::npos) << text;
    EXPECT_NE(text.find("for i0_i1_f_i in 0..6 vectorized"), std::string::npos) << text;
    std::mt19937 rng(5);
    ew.check(fn, rng, "peeled");
}
