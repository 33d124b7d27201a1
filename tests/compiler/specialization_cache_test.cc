// SpecializationCache (compiler/specialization_cache.h): LRU order, capacity, one make per key
// under concurrency, failures not cached; and ConstantPool (compiler/constant_pool.h): equal
// constants of two executables end up in one storage, released when no executable holds them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "compiler/constant_pool.h"
#include "compiler/specialization_cache.h"

namespace kiln::compiler {
namespace {

using Cache = SpecializationCache<int>;

Cache::Ptr make_int(int v) { return std::make_shared<const int>(v); }

TEST(SpecializationCache, KeepsTheMostRecentlyUsedUpToCapacity) {
    Cache c(2);
    int makes = 0;
    auto get = [&](const std::string& key, int v) { return *c.get(key, [&] { ++makes; return make_int(v); }); };
    EXPECT_EQ(get("a", 1), 1);
    EXPECT_EQ(get("b", 2), 2);
    EXPECT_EQ(get("a", 100), 1);  // held: make not called
    EXPECT_EQ(makes, 2);
    EXPECT_EQ(get("c", 3), 3);  // evicts b, the least recently used
    EXPECT_EQ(c.keys(), (std::vector<std::string>{"c", "a"}));
    EXPECT_EQ(c.find("b"), nullptr);
    EXPECT_EQ(get("b", 4), 4);  // made again
    const SpecializationCacheStats st = c.stats();
    EXPECT_EQ(st.compiles, 4);
    EXPECT_EQ(st.evictions, 2);
    EXPECT_EQ(st.held, 2);
    EXPECT_EQ(st.hits, 1);
    EXPECT_EQ(*c.most_recent(), 4);
}

TEST(SpecializationCache, OneMakePerKeyWhileOthersWait) {
    Cache c(4);
    std::atomic<int> makes{0};
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
            const std::string key = t % 2 ? "odd" : "even";
            Cache::Ptr v = c.get(key, [&] {
                ++makes;
                std::this_thread::sleep_for(std::chrono::milliseconds(50));  // others arrive meanwhile
                return make_int(t % 2);
            });
            if (*v != t % 2) ++wrong;
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(makes.load(), 2);
    EXPECT_EQ(wrong.load(), 0);
}

TEST(SpecializationCache, AFailedMakeReachesTheCallerAndIsNotCached) {
    Cache c(2);
    EXPECT_THROW(c.get("a", []() -> Cache::Ptr { throw Error(ErrorKind::kInvalidArgument, "bad shape"); }), Error);
    EXPECT_EQ(c.stats().held, 0);
    EXPECT_EQ(*c.get("a", [] { return make_int(7); }), 7);
}

TEST(SpecializationCache, CapacityBelowOneIsAnError) { EXPECT_THROW(Cache c(0), Error); }

runtime::BufferDesc constant_buffer(std::vector<float> values) {
    runtime::BufferDesc b;
    b.role = runtime::BufferRole::kConstant;
    b.shape = {static_cast<int64_t>(values.size())};
    b.constant = Tensor(DType::kFloat32, b.shape);
    std::copy(values.begin(), values.end(), b.constant.data_as<float>());
    return b;
}

TEST(ConstantPool, EqualConstantsShareOneStorage) {
    ConstantPool pool;
    auto a = std::make_shared<runtime::Executable>();
    a->buffers = {constant_buffer({1, 2, 3}), constant_buffer({4, 5})};
    pool.share(*a);
    EXPECT_EQ(pool.bytes(), 5 * sizeof(float));
    auto b = std::make_shared<runtime::Executable>();
    b->buffers = {constant_buffer({4, 5}), constant_buffer({1, 2, 4})};  // one equal, one not
    pool.share(*b);
    EXPECT_EQ(b->buffers[0].constant.data(), a->buffers[1].constant.data());
    EXPECT_NE(b->buffers[1].constant.data(), a->buffers[0].constant.data());
    EXPECT_EQ(pool.bytes(), 8 * sizeof(float));
    a.reset();  // {1,2,3} was a's only
    pool.release();
    EXPECT_EQ(pool.bytes(), 5 * sizeof(float));
    b.reset();
    pool.release();
    EXPECT_EQ(pool.bytes(), 0u);
}

}  // namespace
}  // namespace kiln::compiler
