// The input pipeline (docs/training.md "Data"): a source of records, a seeded shuffle, map
// stages run in parallel on a thread pool, batching, and a bounded prefetch queue, so that
// step i+1's batch is prepared while step i computes.
//
//   auto src = data::open_source("digits.npz");             // npy/npz, CSV, image dir
//   data::Pipeline p(src, {.batch_size = 32, .shuffle = true, .seed = 1});
//   p.map([](data::Example& e, data::Rng& rng) { ... });   // decode, normalize, crop, flip
//   p.start_epoch(0);
//   while (auto b = p.next()) train(*b);                     // nullopt at the end of the epoch
//
// A bad record (unreadable image, a CSV row with the wrong number of fields, a label out of
// range) is a kiln::Error naming the file and the row or record, raised from next() on the
// consumer's thread; never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/tensor.h"

namespace kiln::data {

/// One record: named fields ("image" -> f32[1,8,8], "labels" -> i64[]).
using Example = std::map<std::string, Tensor>;
/// A batch: the same fields stacked along a new leading axis.
using Batch = std::map<std::string, Tensor>;
using Rng = std::mt19937_64;

/// Random-access records.
class Source {
public:
    virtual ~Source() = default;
    virtual int64_t size() const = 0;
    /// Record i (0 <= i < size()); a bad record throws naming the file and the record.
    virtual Example get(int64_t i) const = 0;
    /// "digits.npz (1797 records: image f32[1,8,8], labels i64[])".
    virtual std::string describe() const = 0;
};

struct SourceOptions {
    /// npz/npy: field name per array (npz member "x" -> "image"); unlisted members keep their names.
    std::map<std::string, std::string> rename;
    /// CSV: the column holding the label ("" = the last); the others are the features field.
    std::string label_column;
    std::string features_field = "input";
    std::string label_field = "labels";
    /// Image directory: image field name; images are decoded to f32 [C,H,W] in [0,1].
    std::string image_field = "image";
};

/// Opens by extension: `.npz` (one record per leading index of its arrays, which must agree),
/// `.npy` (one field "input"), `.csv` (header row, numeric fields), or a directory with a
/// `labels.txt`/`labels.csv` of "file,label" lines and the images it names (PNG, PGM/PPM).
std::shared_ptr<Source> open_source(const std::string& path, const SourceOptions& opts = {});
/// Records [begin, end) of `src` (a held-out split).
std::shared_ptr<Source> subset(std::shared_ptr<Source> src, int64_t begin, int64_t end);

/// A map stage: changes one record in place; `rng` is seeded per (seed, epoch, record) (record =
/// the source index), so the result does not depend on which thread ran it. Stages run on the
/// pipeline's worker threads, several records at once: they must not share mutable state
/// unguarded. Built-in stages: data/transforms.h.
using MapFn = std::function<void(Example& example, Rng& rng)>;

struct PipelineOptions {
    int64_t batch_size = 32;
    /// Drop the last partial batch (a compiled training step has a static batch size).
    bool drop_remainder = true;
    bool shuffle = false;
    uint64_t seed = 0;
    /// Batches prepared ahead of the consumer (the bounded queue; back-pressure beyond it).
    int prefetch = 2;
    /// Threads running source reads and map stages (0 = one per core, minus the consumer's).
    /// Dedicated threads, not the runtime's pools: they block (back-pressure, file reads) and
    /// must not take the threads the compiled training step computes on.
    int map_threads = 0;
    /// Data-parallel sharding (needs drop_remainder): this pipeline yields rank shard_index's
    /// slice of each global batch of batch_size * shard_count records (epoch_order.h shard_order).
    int shard_count = 1, shard_index = 0;
};

class Pipeline {
public:
    Pipeline(std::shared_ptr<Source> source, PipelineOptions opts);
    ~Pipeline();  // stops the workers
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    /// Appends a map stage (before start_epoch).
    void map(MapFn fn);
    /// Starts producing epoch `epoch` (its shuffle order is a function of seed and epoch),
    /// skipping its first `skip_batches` batches (resuming mid-epoch).
    void start_epoch(int64_t epoch, int64_t skip_batches = 0);
    /// The next batch of the epoch, or nullopt at its end. Rethrows a worker's error.
    std::optional<Batch> next();
    int64_t batches_per_epoch() const;
    /// The number of worker threads running source reads and map stages (map_threads resolved).
    int map_threads() const;
    const Source& source() const { return *source_; }

    /// Seconds next() spent waiting for a batch since start_epoch (the pipeline's stall time).
    /// A training loop's step time is compute + stall; the pipeline keeps up when the stall
    /// per step stays small next to compute (wait_seconds() / steps vs the compute time).
    double wait_seconds() const;

private:
    void worker_loop();

    struct State;
    std::shared_ptr<Source> source_;
    PipelineOptions opts_;
    std::vector<MapFn> maps_;
    std::unique_ptr<State> state_;
};

}  // namespace kiln::data
