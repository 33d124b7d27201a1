// The pieces of the fused recurrent kernel's batch-1 path: the packed recurrent GEMV
// (runtime/rnn_gemv.h) against a plain double-precision dot product, and the step loop
// (runtime/rnn_steps.h): every part of a step after every part of the step before, each item
// exactly once, with one task alone, with real threads, and when stopped. (The whole kernel is
// tested against ONNX Runtime in tests/models/test_recurrent_vs_ort.py.)
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "runtime/rnn_gemv.h"
#include "runtime/rnn_steps.h"

namespace kiln::runtime::rnn {
namespace {

/// R [gates * H, K]; checks y = R[rows of gates q0.., units j0..] h for both walking orders.
void check_gemv(int64_t H, int64_t K, int64_t gates, int64_t q0, int64_t nq, int64_t j0, int64_t hp) {
    std::mt19937 rng(static_cast<unsigned>(H * 131 + K * 7 + nq));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> r(static_cast<size_t>(gates * H * K)), h(static_cast<size_t>(K));
    for (float& x : r) x = u(rng);
    for (float& x : h) x = u(rng);
    PackedGemv g(r.data(), H, K, q0, nq, j0, hp);
    for (int isa = 0; isa < 4; ++isa) {  // AVX-512 where this CPU and the gate count allow it, then AVX2
        const bool backward = isa % 2 == 1;
        g.set_avx512(isa < 2);
        std::vector<float> y(static_cast<size_t>(nq * hp), NAN);
        g.run(h.data(), y.data(), backward);
        for (int64_t q = 0; q < nq; ++q)
            for (int64_t j = 0; j < hp; ++j) {
                double want = 0;
                for (int64_t k = 0; k < K; ++k) want += double(r[((q0 + q) * H + j0 + j) * K + k]) * h[k];
                ASSERT_NEAR(y[q * hp + j], want, 1e-4) << "H=" << H << " K=" << K << " q=" << q << " j=" << j
                                                        << " avx512=" << g.avx512();
            }
    }
}

TEST(RnnGemv, MatchesADotProductForEveryGateCountAndRaggedParts) {
    if (!PackedGemv::supported()) GTEST_SKIP() << "no AVX2 + FMA";
    check_gemv(256, 256, 4, 0, 4, 0, 256);  // an LSTM's whole recurrent weight
    check_gemv(100, 100, 4, 0, 4, 48, 52);  // a part whose last block is partial
    check_gemv(37, 37, 3, 0, 2, 0, 37);     // GRU's z, r; an odd K (the unrolled loop's tail)
    check_gemv(37, 37, 3, 2, 1, 16, 21);    // GRU's h gate on r * h
    check_gemv(5, 5, 1, 0, 1, 0, 5);        // an RNN smaller than one block
    check_gemv(40, 24, 3, 0, 3, 8, 32);     // K other than H
    check_gemv(64, 67, 4, 0, 4, 0, 64);     // K not a multiple of the AVX-512 kernel's unroll
    check_gemv(30, 30, 3, 0, 2, 0, 30);     // two gates (GRU's z, r) on the AVX-512 kernel, a partial block
}

/// Runs a loop of `steps` x `parts` items on `tasks` threads; checks the order invariant.
void check_loop(int64_t steps, int64_t parts, int tasks) {
    StepLoop loop(steps, parts);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(steps * parts));
    std::atomic<int64_t> done{0};
    std::atomic<bool> bad{false};
    auto item = [&](int64_t s, int64_t p) {
        if (done.load() < s * parts) bad = true;  // a part of step s before step s - 1 ended
        runs[s * parts + p].fetch_add(1);
        done.fetch_add(1);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < tasks; ++t) threads.emplace_back([&] { loop.work(item, nullptr); });
    for (std::thread& t : threads) t.join();
    EXPECT_FALSE(bad.load()) << "steps " << steps << " parts " << parts << " tasks " << tasks;
    EXPECT_FALSE(loop.stopped());
    for (const auto& r : runs) ASSERT_EQ(r.load(), 1);
}

TEST(RnnStepLoop, RunsEveryItemOnceInStepOrder) {
    check_loop(50, 1, 1);
    check_loop(50, 2, 1);  // one task: it runs every part (the other never arrives)
    check_loop(200, 2, 2);
    check_loop(100, 3, 2);  // more parts than tasks
    check_loop(100, 2, 4);  // more tasks than parts
}

TEST(RnnStepLoop, StopsWhenAsked) {
    StepLoop loop(100, 2);
    volatile int32_t stop = 0;
    int ran = 0;
    loop.work([&](int64_t s, int64_t) {
        ++ran;
        if (s == 10) stop = 1;
    }, &stop);
    EXPECT_TRUE(loop.stopped());
    EXPECT_LT(ran, 200);
}

TEST(RnnStepLoop, AnItemsErrorReachesItsTaskAndEndsTheOthers) {
    StepLoop loop(100, 2);
    std::atomic<bool> threw{false};
    auto item = [&](int64_t s, int64_t) {
        if (s == 5) throw std::runtime_error("item failed");
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&] {
            try {
                loop.work(item, nullptr);
            } catch (const std::runtime_error&) {
                threw = true;
            }
        });
    for (std::thread& t : threads) t.join();  // neither waits forever for the failed item
    EXPECT_TRUE(threw.load());
}

}  // namespace
}  // namespace kiln::runtime::rnn
