// The randomness of the pipeline, as pure functions of (seed, epoch, record), so a resumed or
// re-run training sees the same data in the same order with the same augmentations, whatever
// the number of threads.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::data {

/// The record order of epoch `epoch` over n records: 0..n-1 when !shuffle, else a permutation
/// that depends only on (seed, epoch) (its own Fisher-Yates, not std::shuffle, whose algorithm
/// differs between standard libraries).
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

/// Rank `index`'s share of an epoch's `order` when `count` ranks train data-parallel on batches
/// of `batch` records each: global batch g is order[g*batch*count, (g+1)*batch*count) and rank r
/// takes its r-th slice of `batch` records, so the concatenation of the ranks' batches g, in
/// rank order, is the global batch g a single process with batch*count records reads. The last
/// partial global batch is dropped.
std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int64_t batch, int count, int index);

/// The seed of record `record`'s map-stage Rng in epoch `epoch`.
uint64_t record_seed(uint64_t seed, int64_t epoch, int64_t record);

}  // namespace kiln::data
