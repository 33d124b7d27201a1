// Training checkpoint files (see training_checkpoint.h).
#include "compiler/training_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string_view>

#include "runtime/mapped_file.h"
#include "support/byte_io.h"
#include "support/error.h"
#include "support/hash64.h"

namespace kiln::compiler {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const std::string& bytes, const std::string& tmp) {
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string why = errno_text();
            ::close(fd);
            ::unlink(tmp.c_str());
            KILN_THROW(kIOError) << "cannot write '" << tmp << "': " << why;
        }
        done += static_cast<size_t>(n);
    }
}

/// hash64 of [data, data + n), a part of a read-only file mapping that starts page-aligned, in
/// chunks, each dropped from this process's memory once hashed (MADV_DONTNEED: clean file pages
/// stay in the page cache, a later read faults them back in), so checksumming a large file
/// never holds more than a chunk of it.
uint64_t hash_mapped(const uint8_t* data, size_t n) {
    constexpr size_t kChunk = size_t{8} << 20;  // a multiple of any page size
    Hasher64 h;
    for (size_t at = 0; at < n; at += kChunk) {
        const size_t len = std::min(kChunk, n - at);
        h.update(data + at, len);
        (void)::madvise(const_cast<uint8_t*>(data + at), len, MADV_DONTNEED);  // advice only
    }
    return h.digest();
}

/// One tensor entry of a checkpoint at `r`: kept (copied into c.tensors) or only its type noted.
void read_tensor(ByteReader& r, const std::string& what, const std::function<bool(const std::string&)>& keep,
                 Checkpoint& c) {
    std::string name = r.str("tensor name");
    const int32_t dt = r.i32("tensor dtype");
    KILN_CHECK(dt >= 0 && dt <= static_cast<int32_t>(DType::kFloat4E2M1) && static_cast<DType>(dt) != DType::kString,
               kInvalidModel)
        << what << ": tensor '" << name << "' has an unknown dtype code " << dt;
    const uint32_t rank = r.count("tensor rank", 8);
    Shape shape;
    for (uint32_t k = 0; k < rank; ++k) {
        shape.push_back(r.i64("tensor dim"));
        KILN_CHECK(shape.back() >= 0, kInvalidModel) << what << ": tensor '" << name << "' has a negative dimension";
    }
    const std::string_view data = r.str_view("tensor data");
    // The element count, capped so a corrupt shape never drives a huge allocation.
    uint64_t bytes_needed = dtype_size(static_cast<DType>(dt));
    for (int64_t d : shape)
        if (__builtin_mul_overflow(bytes_needed, static_cast<uint64_t>(d), &bytes_needed)) bytes_needed = ~uint64_t{0};
    KILN_CHECK(bytes_needed == data.size(), kInvalidModel)
        << what << ": tensor '" << name << "' " << shape_str(shape) << " needs " << bytes_needed << " bytes, holds "
        << data.size();
    if (!keep(name)) {
        c.skipped[name] = {static_cast<DType>(dt), std::move(shape)};
        return;
    }
    Tensor t(static_cast<DType>(dt), shape);
    std::memcpy(t.data(), data.data(), data.size());
    c.tensors[name] = std::move(t);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
    const std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    KILN_CHECK(fd >= 0, kIOError) << "cannot write '" << path << "': cannot create '" << tmp << "': " << errno_text();
    write_all(fd, bytes, tmp);
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const std::string why = errno_text();
        ::unlink(tmp.c_str());
        KILN_THROW(kIOError) << "cannot write '" << tmp << "': " << why;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = errno_text();
        ::unlink(tmp.c_str());
        KILN_THROW(kIOError) << "cannot rename '" << tmp << "' to '" << path << "': " << why;
    }
    // The rename is durable once the directory entry is.
    std::string dir = std::filesystem::path(path).parent_path().string();
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
    ByteWriter w;
    w.bytes(kMagic, sizeof kMagic);
    w.u32(kVersion);
    w.i64(c.step);
    w.u32(static_cast<uint32_t>(c.extra.size()));
    for (const auto& [k, v] : c.extra) {
        w.str(k);
        w.str(v);
    }
    w.u32(static_cast<uint32_t>(c.tensors.size()));
    for (const auto& [name, t] : c.tensors) {
        KILN_CHECK(t.dtype() != DType::kString, kInvalidArgument) << "checkpoint tensor '" << name << "' holds strings";
        KILN_CHECK(t.nbytes() < (size_t{1} << 32), kUnsupported)
            << "checkpoint tensor '" << name << "' has " << t.nbytes() << " bytes; at most 4 GiB per tensor";
        w.str(name);
        w.i32(static_cast<int32_t>(t.dtype()));
        w.u32(static_cast<uint32_t>(t.shape().size()));
        for (int64_t d : t.shape()) w.i64(d);
        w.str(std::string_view(static_cast<const char*>(t.data()), t.nbytes()));
    }
    const uint64_t sum = hash64(w.data().data(), w.size());
    w.u64(sum);
    write_file_atomically(path, w.data());
}

Checkpoint read_checkpoint(const std::string& path) {
    return read_checkpoint(path, [](const std::string&) { return true; });
}

Checkpoint read_checkpoint(const std::string& path, const std::function<bool(const std::string&)>& keep) {
    KILN_CHECK(std::filesystem::is_regular_file(path), kIOError) << "cannot open checkpoint '" << path << "': no such file";
    const std::shared_ptr<runtime::MappedFile> file = runtime::MappedFile::open(path, false);
    const std::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
    const std::string what = "checkpoint '" + path + "'";
    KILN_CHECK(bytes.size() >= sizeof kMagic + 4 + 8 && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0, kInvalidModel)
        << what << " is not a Kiln training checkpoint (no KILNCKPT header)";
    KILN_CHECK(bytes.size() >= sizeof kMagic + 4 + 8 + 8, kInvalidModel) << what << " is truncated (" << bytes.size() << " bytes)";
    const size_t body = bytes.size() - 8;
    ByteReader tail(bytes.data() + body, 8, what);
    const uint64_t stored = tail.u64("checksum");
    ByteReader r(bytes.data(), body, what);
    r.u64("magic");
    const uint32_t version = r.u32("version");
    KILN_CHECK(version == kVersion, kInvalidModel) << what << " has format version " << version << ", expected " << kVersion;
    // The checksum covers everything, so a truncated file (whose last 8 bytes are data) or a
    // flipped byte fails here with one clear message rather than somewhere in the parse.
    KILN_CHECK(hash_mapped(file->data(), body) == stored, kInvalidModel)
        << what << " is corrupt or truncated (checksum mismatch over " << body << " bytes)";
    Checkpoint c;
    c.step = r.i64("step");
    const uint32_t n_extra = r.count("extra count", 8);
    for (uint32_t i = 0; i < n_extra; ++i) {
        std::string k = r.str("extra key");
        c.extra[k] = r.str("extra value");
    }
    const uint32_t n = r.count("tensor count", 16);
    for (uint32_t i = 0; i < n; ++i) read_tensor(r, what, keep, c);
    r.expect_end();
    return c;
}

}  // namespace kiln::compiler
