// Seeds are mixed with splitmix64 (Steele et al., "Fast splittable pseudorandom number
// generators"): nearby inputs (epoch 0 and 1, records 5 and 6) give unrelated streams.
#include "data/epoch_order.h"

#include <numeric>
#include <random>

namespace kiln::data {
namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A uniform integer in [0, bound) by rejection (no modulo bias).
uint64_t below(std::mt19937_64& rng, uint64_t bound) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
        uint64_t r = rng();
        if (r < limit) return r % bound;
    }
}

}  // namespace

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    if (!shuffle) return order;
    std::mt19937_64 rng(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch)));
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[below(rng, static_cast<uint64_t>(i) + 1)]);
    return order;
}

std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int64_t batch, int count, int index) {
    const int64_t global = batch * count, batches = static_cast<int64_t>(order.size()) / global;
    std::vector<int64_t> out;
    out.reserve(static_cast<size_t>(batches * batch));
    for (int64_t g = 0; g < batches; ++g)
        out.insert(out.end(), order.begin() + g * global + index * batch, order.begin() + g * global + (index + 1) * batch);
    return out;
}

uint64_t record_seed(uint64_t seed, int64_t epoch, int64_t record) {
    // A different first mix than epoch_order's, so a record's stream is not the shuffle's.
    uint64_t s = splitmix64(seed ^ 0x5851f42d4c957f2dull);
    s = splitmix64(s ^ static_cast<uint64_t>(epoch));
    return splitmix64(s ^ static_cast<uint64_t>(record));
}

}  // namespace kiln::data
