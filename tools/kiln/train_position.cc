// Position (train_position.h).
#include "train_position.h"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "support/error.h"

namespace kiln::cli {

std::string checkpoint_path(const TrainArgs& a) {
    KILN_CHECK(a.checkpoint_every == 0 || !a.checkpoint_dir.empty(), kInvalidArgument)
        << "--checkpoint-every needs --checkpoint-dir";
    KILN_CHECK(!a.resume || !a.checkpoint_dir.empty(), kInvalidArgument) << "--resume needs --checkpoint-dir";
    std::string checkpoint =
        a.checkpoint_dir.empty() ? "" : (std::filesystem::path(a.checkpoint_dir) / "checkpoint.kiln").string();
    KILN_CHECK(!a.resume || std::filesystem::exists(checkpoint), kInvalidArgument)
        << "--resume: no checkpoint at '" << checkpoint << "'; run without --resume to start from the model's weights";
    return checkpoint;
}

std::map<std::string, std::string> position_extra(const Position& p, const TrainArgs& a) {
    return {{"epoch", std::to_string(p.epoch)},
            {"batch", std::to_string(p.batch)},
            {"seed", std::to_string(a.data.seed)},
            {"batch_size", std::to_string(a.data.batch_size)},
            {"shuffle", a.data.shuffle ? "1" : "0"},
            {"ema", fmt::format("{:.17g}", p.ema)},
            {"ema_steps", std::to_string(p.ema_steps)},
            {"csv_rows", std::to_string(p.csv_rows)},
            {"world_size", std::to_string(a.data.shard_count)}};
}

Position read_position(const std::map<std::string, std::string>& extra, const std::string& path, TrainArgs& a) {
    auto get = [&](const char* key) {
        auto it = extra.find(key);
        KILN_CHECK(it != extra.end(), kInvalidArgument)
            << "checkpoint '" << path << "' was not written by kiln train: it has no '" << key << "' entry";
        return it->second;
    };
    Position p;
    try {
        p.epoch = std::stoll(get("epoch"));
        p.batch = std::stoll(get("batch"));
        p.ema = std::stod(get("ema"));
        p.ema_steps = std::stoll(get("ema_steps"));
        p.csv_rows = std::stoll(get("csv_rows"));
        int64_t batch_size = std::stoll(get("batch_size"));
        KILN_CHECK(batch_size == a.data.batch_size, kInvalidArgument)
            << "--resume: checkpoint '" << path << "' was trained with --batch-size " << batch_size << ", this run has "
            << a.data.batch_size;
        int64_t world = extra.count("world_size") ? std::stoll(extra.at("world_size")) : 1;
        KILN_CHECK(world == a.data.shard_count, kInvalidArgument)
            << "--resume: checkpoint '" << path << "' was trained by " << world << " data-parallel rank(s), this run has "
            << a.data.shard_count << " (the data position depends on it)";
        uint64_t seed = std::stoull(get("seed"));
        bool shuffle = get("shuffle") == "1";
        if (seed != a.data.seed || shuffle != a.data.shuffle)
            fmt::print(stderr, "note: --resume continues the checkpoint's data order (--seed {}{})\n", seed,
                       shuffle ? "" : " --no-shuffle");
        a.data.seed = seed;
        a.data.shuffle = shuffle;
    } catch (const std::logic_error& e) {  // stoll on a garbled entry
        KILN_THROW(kInvalidArgument) << "checkpoint '" << path << "': a garbled position entry (" << e.what() << ")";
    }
    return p;
}

}  // namespace kiln::cli
