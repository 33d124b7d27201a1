// Training checkpoints: one file holding named tensors, a string map (`extra`, the trainer's
// data position) and the step counter.
//
// Format (little-endian, support/byte_io.h): "KILNCKPT", u32 version (1), i64 step, u32 count
// of extra entries then (str key, str value) each, u32 count of tensors then per tensor (str
// name, i32 dtype (kiln::DType), u32 rank, i64 dims..., str data), then u64 hash64 of every byte
// before it. A reader checks the magic, the version, every length against the bytes left and
// the checksum, so a truncated or corrupt file is a clear kInvalidModel error, never a crash.
// write_checkpoint writes a temporary file beside `path`, fsyncs it, renames it over `path` and
// fsyncs the directory: a failed or interrupted write leaves the previous file as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "support/tensor.h"

namespace kiln::compiler {

struct Checkpoint {
    int64_t step = 0;
    std::map<std::string, std::string> extra;
    std::map<std::string, Tensor> tensors;
    /// The tensors read_checkpoint's `keep` left out: their dtype and shape only (the file's
    /// layout can still be checked whole). write_checkpoint ignores it.
    std::map<std::string, std::pair<DType, Shape>> skipped;
};

/// Writes `c` to `path` atomically (see the file comment); kIOError naming the file on failure.
void write_checkpoint(const std::string& path, const Checkpoint& c);
/// Reads a checkpoint; kIOError (cannot read) or kInvalidModel (not a checkpoint, truncated,
/// corrupt: names the file and what was being read).
Checkpoint read_checkpoint(const std::string& path);
/// Reads only the tensors whose names `keep` accepts; the others go into Checkpoint::skipped.
/// The file is mapped read-only, not copied, and checksummed whole as read_checkpoint does, so
/// the reader's own memory holds only the kept tensors (a pipeline stage resuming from the
/// whole model's checkpoint, distributed/pipeline_parallel.h).
Checkpoint read_checkpoint(const std::string& path, const std::function<bool(const std::string&)>& keep);

/// Writes `bytes` to `path` atomically: `path`.tmp, fsync, rename, fsync of the directory.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace kiln::compiler
