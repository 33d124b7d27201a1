// The Pipeline: seeded order, thread-count independence, batching, resume, errors from workers,
// back-pressure, overlap of preparation with consumption, and shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "data/epoch_order.h"
#include "data/pipeline.h"
#include "support/error.h"

namespace kiln::data {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Record i: x = f32[2]{i, 10 i}, labels = i64[] i.
class CountingSource : public Source {
public:
    explicit CountingSource(int64_t n) : n_(n) {}
    int64_t size() const override { return n_; }
    Example get(int64_t i) const override {
        Example ex;
        Tensor x(DType::kFloat32, {2});
        x.data_as<float>()[0] = static_cast<float>(i);
        x.data_as<float>()[1] = static_cast<float>(10 * i);
        Tensor y(DType::kInt64, {});
        y.data_as<int64_t>()[0] = i;
        ex["x"] = x;
        ex["labels"] = y;
        return ex;
    }
    std::string describe() const override { return "counting(" + std::to_string(n_) + ")"; }

private:
    int64_t n_;
};

std::vector<int64_t> labels_of(const Batch& b) {
    const Tensor& y = b.at("labels");
    return std::vector<int64_t>(y.data_as<int64_t>(), y.data_as<int64_t>() + y.numel());
}

bool same_batch(const Batch& a, const Batch& b) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, t] : a) {
        auto it = b.find(k);
        if (it == b.end() || it->second.dtype() != t.dtype() || it->second.shape() != t.shape() ||
            std::memcmp(it->second.data(), t.data(), t.nbytes()) != 0)
            return false;
    }
    return true;
}

// A map stage using the record's Rng: "noise" = f32[3] of its first draws; it sleeps a little,
// differently per record, to shake up the scheduling.
void add_noise(Example& ex, Rng& rng) {
    Tensor r(DType::kFloat32, {3});
    for (int k = 0; k < 3; ++k) r.data_as<float>()[k] = std::uniform_real_distribution<float>(0, 1)(rng);
    ex["noise"] = r;
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (ex.at("labels").data_as<int64_t>()[0] % 5)));
}

std::vector<Batch> run_epoch(Pipeline& p, int64_t epoch, int64_t skip = 0) {
    p.start_epoch(epoch, skip);
    std::vector<Batch> out;
    while (auto b = p.next()) out.push_back(std::move(*b));
    return out;
}

TEST(EpochOrder, PermutationDeterministicPerSeedAndEpoch) {
    std::vector<int64_t> iota(100);
    std::iota(iota.begin(), iota.end(), 0);
    std::vector<int64_t> a = epoch_order(100, true, 7, 0);
    EXPECT_EQ(a, epoch_order(100, true, 7, 0));
    EXPECT_NE(a, iota);
    EXPECT_NE(a, epoch_order(100, true, 7, 1));
    EXPECT_NE(a, epoch_order(100, true, 8, 0));
    std::vector<int64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota);
    EXPECT_EQ(epoch_order(100, false, 7, 3), iota);
    EXPECT_NE(record_seed(1, 0, 5), record_seed(1, 0, 6));
    EXPECT_NE(record_seed(1, 0, 5), record_seed(1, 1, 5));
}

TEST(Pipeline, ShuffledEpochCoversEveryRecordOnce) {
    auto src = std::make_shared<CountingSource>(23);
    Pipeline p(src, {.batch_size = 5, .drop_remainder = false, .shuffle = true, .seed = 3, .map_threads = 2});
    for (int64_t epoch : {0, 1}) {
        std::vector<int64_t> seen;
        for (const Batch& b : run_epoch(p, epoch)) {
            auto l = labels_of(b);
            seen.insert(seen.end(), l.begin(), l.end());
            // Fields stay together: x[0] is the label.
            for (size_t k = 0; k < l.size(); ++k) EXPECT_EQ(b.at("x").data_as<float>()[2 * k], l[k]);
        }
        EXPECT_EQ(seen, epoch_order(23, true, 3, epoch)) << "epoch " << epoch;
    }
}

TEST(Pipeline, SameBatchesWhateverTheThreadCount) {
    auto src = std::make_shared<CountingSource>(37);
    std::vector<std::vector<Batch>> runs;
    for (int threads : {1, 4}) {
        for (int prefetch : {1, 3}) {
            Pipeline p(src, {.batch_size = 4, .shuffle = true, .seed = 11, .prefetch = prefetch, .map_threads = threads});
            p.map(add_noise);
            EXPECT_EQ(p.map_threads(), threads);
            std::vector<Batch> all = run_epoch(p, 2);
            std::vector<Batch> e3 = run_epoch(p, 3);
            all.insert(all.end(), e3.begin(), e3.end());
            runs.push_back(std::move(all));
        }
    }
    ASSERT_EQ(runs[0].size(), 2u * 9);
    for (size_t r = 1; r < runs.size(); ++r)
        for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(same_batch(runs[0][i], runs[r][i])) << r << "/" << i;
    // The noise differs between epochs for the same record (its Rng is seeded by the epoch).
    EXPECT_EQ(runs[0][0].at("noise").shape(), (Shape{4, 3}));
}

TEST(Pipeline, DropRemainder) {
    auto src = std::make_shared<CountingSource>(10);
    Pipeline keep(src, {.batch_size = 4, .drop_remainder = false, .map_threads = 2});
    EXPECT_EQ(keep.batches_per_epoch(), 3);
    std::vector<Batch> k = run_epoch(keep, 0);
    ASSERT_EQ(k.size(), 3u);
    EXPECT_EQ(labels_of(k[2]), (std::vector<int64_t>{8, 9}));
    EXPECT_EQ(k[2].at("x").shape(), (Shape{2, 2}));
    Pipeline drop(src, {.batch_size = 4, .drop_remainder = true, .map_threads = 2});
    EXPECT_EQ(drop.batches_per_epoch(), 2);
    std::vector<Batch> d = run_epoch(drop, 0);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(labels_of(d[1]), (std::vector<int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(d[1].at("x").shape(), (Shape{4, 2}));
    EXPECT_FALSE(drop.next().has_value());  // stays at the end
}

TEST(Pipeline, SkipBatchesResumesExactly) {
    auto src = std::make_shared<CountingSource>(30);
    PipelineOptions o{.batch_size = 4, .shuffle = true, .seed = 5, .map_threads = 3};
    Pipeline full(src, o);
    full.map(add_noise);
    std::vector<Batch> all = run_epoch(full, 4);
    ASSERT_EQ(all.size(), 7u);
    Pipeline resumed(src, o);
    resumed.map(add_noise);
    std::vector<Batch> rest = run_epoch(resumed, 4, 3);
    ASSERT_EQ(rest.size(), 4u);
    for (size_t i = 0; i < rest.size(); ++i) EXPECT_TRUE(same_batch(all[3 + i], rest[i])) << i;
    EXPECT_TRUE(run_epoch(resumed, 4, 7).empty());
    EXPECT_THROW(resumed.start_epoch(4, 8), Error);
}

TEST(Pipeline, RestartingAnEpochMidwayDropsStaleWork) {
    auto src = std::make_shared<CountingSource>(40);
    Pipeline p(src, {.batch_size = 4, .shuffle = true, .seed = 9, .prefetch = 3, .map_threads = 3});
    p.map(add_noise);
    std::vector<Batch> ref = run_epoch(p, 1);
    p.start_epoch(0);
    ASSERT_TRUE(p.next().has_value());  // leave epoch 0 with work in flight
    std::vector<Batch> again = run_epoch(p, 1);
    ASSERT_EQ(again.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(same_batch(ref[i], again[i])) << i;
}

TEST(Pipeline, MapErrorIsRaisedFromNextNamingTheRecord) {
    auto src = std::make_shared<CountingSource>(40);
    for (bool kiln_error : {true, false}) {
        SCOPED_TRACE(kiln_error ? "kiln::Error" : "std::runtime_error");
        Pipeline p(src, {.batch_size = 4, .prefetch = 2, .map_threads = 3});
        p.map([kiln_error](Example& ex, Rng&) {
            if (ex.at("labels").data_as<int64_t>()[0] != 13) return;
            if (kiln_error) KILN_THROW(kInvalidArgument) << "label out of range";
            throw std::runtime_error("boom");
        });
        p.start_epoch(0);
        for (int b = 0; b < 3; ++b) ASSERT_TRUE(p.next().has_value()) << b;  // records 0..11
        try {
            p.next();
            FAIL() << "expected an error";
        } catch (const Error& e) {
            std::string w = e.what();
            EXPECT_NE(w.find("record 13 (epoch 0, batch 3) of counting(40)"), std::string::npos) << w;
            EXPECT_NE(w.find(kiln_error ? "label out of range" : "boom"), std::string::npos) << w;
        }
        EXPECT_THROW(p.next(), Error);  // the epoch stays failed
        // A new epoch starts clean (record 13 still fails there, in batch 3 again).
        p.start_epoch(1, 4);
        ASSERT_TRUE(p.next().has_value());
    }
}

TEST(Pipeline, MismatchedShapesAreAnErrorNamingTheRecord) {
    auto src = std::make_shared<CountingSource>(8);
    Pipeline p(src, {.batch_size = 4, .map_threads = 2});
    p.map([](Example& ex, Rng&) {
        if (ex.at("labels").data_as<int64_t>()[0] == 6) ex["x"] = Tensor(DType::kFloat32, {3});
    });
    p.start_epoch(0);
    ASSERT_TRUE(p.next().has_value());
    try {
        p.next();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        std::string w = e.what();
        EXPECT_NE(w.find("record 6 has f32[3] but record 4 has f32[2]"), std::string::npos) << w;
    }
}

TEST(Pipeline, BackPressureBoundsTheWorkAhead) {
    auto src = std::make_shared<CountingSource>(64);
    std::atomic<int64_t> mapped{0};
    const int64_t bs = 4, prefetch = 2;
    Pipeline p(src, {.batch_size = bs, .prefetch = prefetch, .map_threads = 3});
    p.map([&](Example&, Rng&) { mapped.fetch_add(1); });
    p.start_epoch(0);
    for (int64_t taken = 1; taken <= 6; ++taken) {
        ASSERT_TRUE(p.next().has_value());
        // Producers run ahead to exactly `prefetch` batches beyond what was taken, then stop.
        const int64_t limit = (taken + prefetch) * bs;
        auto deadline = Clock::now() + std::chrono::seconds(5);
        while (mapped.load() < limit && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
        std::this_thread::sleep_for(milliseconds(30));  // a slow consumer
        EXPECT_EQ(mapped.load(), limit) << "after taking " << taken << " batches";
    }
}

// A map stage costing T per batch and a consumer costing T per batch overlap: about
// (batches + 1) T in all, where doing them in turn takes 2 batches T.
TEST(Pipeline, PreparationOverlapsConsumption) {
    const int64_t batches = 10, bs = 4;
    const auto T = milliseconds(40);
    auto src = std::make_shared<CountingSource>(batches * bs);
    Pipeline p(src, {.batch_size = bs, .prefetch = 2, .map_threads = 1});
    p.map([&](Example&, Rng&) { std::this_thread::sleep_for(T / bs); });
    auto t0 = Clock::now();
    p.start_epoch(0);
    int64_t n = 0;
    while (auto b = p.next()) {
        ++n;
        std::this_thread::sleep_for(T);
    }
    double took = std::chrono::duration<double>(Clock::now() - t0).count();
    double ideal = std::chrono::duration<double>(T).count() * (batches + 1);
    EXPECT_EQ(n, batches);
    EXPECT_LT(took, 1.5 * ideal) << "took " << took << " s; serial would be " << 2 * batches * 0.04 << " s";
    // The consumer waited about one T (the first batch), not a T per batch.
    EXPECT_LT(p.wait_seconds(), 0.5 * batches * 0.04) << p.wait_seconds();
    EXPECT_GT(p.wait_seconds(), 0.5 * 0.04) << p.wait_seconds();
}

TEST(Pipeline, DestructorStopsWorkersMidEpoch) {
    auto src = std::make_shared<CountingSource>(1000);
    auto t0 = Clock::now();
    {
        Pipeline p(src, {.batch_size = 8, .shuffle = true, .prefetch = 4, .map_threads = 4});
        p.map([](Example&, Rng&) { std::this_thread::sleep_for(milliseconds(2)); });
        p.start_epoch(0);
        ASSERT_TRUE(p.next().has_value());
    }
    // Waits for at most the record each worker is on, not for the epoch (1000 x 2 ms / 4).
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.4);
    // Never started, or started and never read: also fine.
    { Pipeline idle(src, {}); }
    {
        Pipeline unread(src, {.batch_size = 8, .map_threads = 2});
        unread.start_epoch(0);
    }
}

TEST(Pipeline, OptionAndCallOrderErrors) {
    auto src = std::make_shared<CountingSource>(5);
    EXPECT_THROW(Pipeline(src, {.batch_size = 0}), Error);
    EXPECT_THROW(Pipeline(src, {.prefetch = 0}), Error);
    EXPECT_THROW(Pipeline(nullptr, {}), Error);
    Pipeline p(src, {.batch_size = 2, .map_threads = 1});
    EXPECT_THROW(p.next(), Error);  // before start_epoch
    p.start_epoch(0);
    EXPECT_THROW(p.map([](Example&, Rng&) {}), Error);  // after start_epoch
    Pipeline big(src, {.batch_size = 8, .drop_remainder = true, .map_threads = 1});
    EXPECT_EQ(big.batches_per_epoch(), 0);
    big.start_epoch(0);
    EXPECT_FALSE(big.next().has_value());
}

// Data-parallel sharding: with 3 ranks x batch 2, the concatenation of the ranks' batches g in
// rank order is the single pipeline's batch g of 6 records (shuffled, with map-stage noise);
// the last partial global batch is dropped on every rank alike.
TEST(Pipeline, ShardsConcatenateToTheGlobalBatch) {
    auto src = std::make_shared<CountingSource>(29);
    PipelineOptions global{.batch_size = 6, .shuffle = true, .seed = 11, .map_threads = 2};
    Pipeline whole(src, global);
    whole.map(add_noise);
    std::vector<Batch> want = run_epoch(whole, 2);
    ASSERT_EQ(want.size(), 4u);
    std::vector<std::vector<Batch>> shards;
    for (int r = 0; r < 3; ++r) {
        PipelineOptions o = global;
        o.batch_size = 2, o.shard_count = 3, o.shard_index = r;
        Pipeline p(src, o);
        p.map(add_noise);
        EXPECT_EQ(p.batches_per_epoch(), 4);
        shards.push_back(run_epoch(p, 2));
        ASSERT_EQ(shards.back().size(), 4u);
    }
    for (size_t g = 0; g < want.size(); ++g) {
        std::vector<int64_t> labels;
        std::vector<float> noise;
        for (int r = 0; r < 3; ++r) {
            for (int64_t l : labels_of(shards[r][g])) labels.push_back(l);
            const Tensor& n = shards[r][g].at("noise");
            noise.insert(noise.end(), n.data_as<float>(), n.data_as<float>() + n.numel());
        }
        EXPECT_EQ(labels, labels_of(want[g])) << g;
        const Tensor& n = want[g].at("noise");
        EXPECT_EQ(noise, std::vector<float>(n.data_as<float>(), n.data_as<float>() + n.numel())) << g;
    }
    PipelineOptions bad = global;
    bad.shard_count = 2, bad.shard_index = 2;
    EXPECT_THROW(Pipeline(src, bad), Error);
}

}  // namespace
}  // namespace kiln::data
