// A damaged artifact is a clear kiln::Error, never a crash: every truncation, thousands of
// seeded byte flips (an error unless the flip hit unchecked padding, which must then load and
// run correctly), flips in the tables with the checksums made to match (the validation behind
// the checksums), and wrong magic, version, CPU features and machine.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "artifact_test_util.h"
#include "runtime/allocator.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"
#include "support/hash64.h"

namespace kiln::runtime::testing {
namespace {

// The layout documented in runtime/artifact_format.h, read here independently.
constexpr size_t kHeader = 64, kEntry = 32, kSections = 5;
constexpr size_t kTableEnd = kHeader + kSections * kEntry;

uint64_t get_u64(const std::string& b, size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
    return v;
}
void put_u64(std::string& b, size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const std::string& b, size_t at) { return static_cast<uint32_t>(get_u64(b + std::string(8, '\0'), at)); }

struct Range {
    uint32_t kind;
    size_t begin, end;
};
/// The checksummed byte ranges: header + table, and each section (by kind).
std::vector<Range> covered(const std::string& b) {
    std::vector<Range> r{{0, 0, kTableEnd}};
    for (size_t i = 0; i < kSections; ++i) {
        const size_t e = kHeader + i * kEntry;
        const size_t off = get_u64(b, e + 8), size = get_u64(b, e + 16);
        r.push_back({get_u32(b, e), off, off + size});
    }
    return r;
}
const Range& section(const std::vector<Range>& rs, uint32_t kind) {
    for (const Range& r : rs)
        if (r.kind == kind) return r;
    throw std::runtime_error("no section");
}

/// Recomputes every section checksum and then the header checksum.
void fix_checksums(std::string& b) {
    for (size_t i = 0; i < kSections; ++i) {
        const size_t e = kHeader + i * kEntry;
        const size_t off = get_u64(b, e + 8), size = get_u64(b, e + 16);
        if (off <= b.size() && size <= b.size() - off) put_u64(b, e + 24, hash64(b.data() + off, size));
    }
    put_u64(b, 24, 0);
    put_u64(b, 24, hash64(b.data(), kTableEnd));
}

std::string saved_artifact(const ScratchDir& dir, const ArtifactInfo& info = {}) {
    const std::string path = dir.file("good.kiln");
    save_artifact(path, *make_test_executable(), test_library_path(), info);
    return read_bytes(path);
}

bool runs_correctly(const std::shared_ptr<Executable>& exe) {
    ThreadPool pool(1);
    CpuAllocator alloc;
    SequentialExecutor ex(exe, &pool, &alloc);
    std::vector<Tensor> outs;
    const Tensor x = test_input(2);
    if (!ex.run({x}, outs).ok() || outs.size() != 1) return false;
    const Tensor ref = reference_output(x);
    return std::memcmp(outs[0].data(), ref.data(), ref.nbytes()) == 0;
}

TEST(ArtifactCorruption, EveryTruncationIsInvalidModel) {
    ScratchDir dir;
    const std::string good = saved_artifact(dir);
    const std::string path = dir.file("cut.kiln");
    write_bytes(path, good);
    int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    for (size_t len = good.size(); len-- > 0;) {
        ASSERT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
        try {
            (void)load_artifact(path);
            ADD_FAILURE() << "a file cut to " << len << " of " << good.size() << " bytes loaded";
        } catch (const Error& e) {
            ASSERT_EQ(e.kind(), ErrorKind::kInvalidModel) << "cut to " << len << ": " << e.what();
            if (len >= 24) {
                ASSERT_NE(e.message().find("is truncated: the artifact header says " + std::to_string(good.size()) +
                                           " bytes, the file has " + std::to_string(len)),
                          std::string::npos)
                    << e.what();
            }
        }
    }
    close(fd);
}

TEST(ArtifactCorruption, ByteFlipsAreErrorsUnlessTheyHitPadding) {
    ScratchDir dir;
    const std::string good = saved_artifact(dir);
    const std::vector<Range> ranges = covered(good);
    const std::string path = dir.file("flipped.kiln");
    write_bytes(path, good);
    int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    std::mt19937_64 rng(20240613);
    int errors = 0, padding = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const size_t at = rng() % good.size();
        const char flipped = static_cast<char>(good[at] ^ static_cast<char>(1 + rng() % 255));
        ASSERT_EQ(pwrite(fd, &flipped, 1, static_cast<off_t>(at)), 1);
        bool in_checked = false;
        for (const Range& r : ranges) in_checked |= at >= r.begin && at < r.end;
        try {
            LoadedArtifact a = load_artifact(path);
            EXPECT_FALSE(in_checked) << "a flip at byte " << at << " (checksummed) went unnoticed";
            EXPECT_TRUE(runs_correctly(a.exe)) << "a flip at padding byte " << at << " changed the results";
            ++padding;
        } catch (const Error& e) {
            EXPECT_TRUE(in_checked) << "a flip at padding byte " << at << " broke the load: " << e.what();
            // Bytes 8..11 are the format version: another version is kUnsupported.
            const ErrorKind want = at >= 8 && at < 12 ? ErrorKind::kUnsupported : ErrorKind::kInvalidModel;
            EXPECT_EQ(e.kind(), want) << "flip at " << at << ": " << e.what();
            ++errors;
        }
        ASSERT_EQ(pwrite(fd, &good[at], 1, static_cast<off_t>(at)), 1);
    }
    close(fd);
    EXPECT_GT(errors, 1000);
    EXPECT_GT(padding, 0) << "no flip hit padding: the test did not cover that case";
}

TEST(ArtifactCorruption, TableFlipsBehindMatchingChecksumsAreCaughtByValidation) {
    // The checksums would catch these; with them recomputed, the decoder's own checks must.
    ScratchDir dir;
    const std::string good = saved_artifact(dir);
    const std::vector<Range> ranges = covered(good);
    const std::string path = dir.file("forged.kiln");
    std::mt19937_64 rng(7);
    int loaded = 0, refused = 0;
    for (uint32_t kind : {0u, 1u, 2u}) {  // header + table, info, executable
        const Range& r = section(ranges, kind);
        for (int trial = 0; trial < 400; ++trial) {
            std::string b = good;
            const int flips = 1 + static_cast<int>(rng() % 3);
            for (int f = 0; f < flips; ++f) {
                const size_t at = r.begin + rng() % (r.end - r.begin);
                if (kind == 0 && at >= 24 && at < 32) continue;  // the header checksum itself
                b[at] = static_cast<char>(b[at] ^ static_cast<char>(1 + rng() % 255));
            }
            fix_checksums(b);
            write_bytes(path, b);
            try {
                LoadedArtifact a = load_artifact(path);
                ++loaded;  // e.g. a renamed node or input: still a consistent executable
            } catch (const Error& e) {
                EXPECT_NE(e.kind(), ErrorKind::kInternal) << "section kind " << kind << ": " << e.what();
                ++refused;
            }
        }
    }
    EXPECT_GT(refused, 600);
    std::cout << "forged tables: " << refused << " refused, " << loaded << " loaded\n";
}

TEST(ArtifactCorruption, WrongMagicIsNotAnArtifact) {
    ScratchDir dir;
    std::string b = saved_artifact(dir);
    b[1] = 'X';
    write_bytes(dir.file("bad.kiln"), b);
    Error e = error_of([&] { load_artifact(dir.file("bad.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(e.message().find("is not a Kiln artifact (no artifact magic at its start)"), std::string::npos) << e.what();
    EXPECT_FALSE(is_artifact_file(dir.file("bad.kiln")));
}

TEST(ArtifactCorruption, AnotherFormatVersionIsUnsupported) {
    ScratchDir dir;
    std::string b = saved_artifact(dir);
    b[8] = 5;  // the version before index checks: refused by this reader, as 6 is by a version-5 reader
    fix_checksums(b);
    write_bytes(dir.file("v5.kiln"), b);
    Error e = error_of([&] { load_artifact(dir.file("v5.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("is a Kiln artifact of format version 5; this runtime reads version 6"), std::string::npos)
        << e.what();
}

TEST(ArtifactCorruption, ChecksumMismatchNamesTheSection) {
    ScratchDir dir;
    std::string b = saved_artifact(dir);
    const std::vector<Range> ranges = covered(b);
    const Range& c = section(ranges, 4);
    b[c.begin + 5] ^= 0x40;  // inside constant 'bias'
    write_bytes(dir.file("c.kiln"), b);
    Error e = error_of([&] { load_artifact(dir.file("c.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(e.message().find("section 'constants' (8192 bytes at offset " + std::to_string(c.begin) +
                               ") checksum mismatch (expected 0x"),
              std::string::npos)
        << e.what();
}

TEST(ArtifactCorruption, MissingCpuFeatureIsUnsupportedAndNamed) {
    ScratchDir dir;
    ArtifactInfo info;
    info.cpu_features = {host_cpu_features()[0], "kiln-test-feature", "avx2"};
    saved_artifact(dir, info);
    Error e = error_of([&] { load_artifact(dir.file("good.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("was compiled for CPU features this CPU lacks: kiln-test-feature"), std::string::npos)
        << e.what();
}

TEST(ArtifactCorruption, AnotherInstructionSetIsUnsupported) {
    ScratchDir dir;
    const std::string other = host_cpu_features()[0] == "x86_64" ? "aarch64" : "x86_64";
    ArtifactInfo info;
    info.cpu_features = {other};
    saved_artifact(dir, info);
    Error e = error_of([&] { load_artifact(dir.file("good.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("CPU features this CPU lacks: " + other), std::string::npos) << e.what();

    // A kernel library for another machine (its ELF header says so) is refused before dlopen.
    std::string b = saved_artifact(dir);
    const std::vector<Range> ranges = covered(b);
    const Range& lib = section(ranges, 3);
    b[lib.begin + 18] = static_cast<char>(other == "aarch64" ? 183 : 62);  // e_machine
    b[lib.begin + 19] = 0;
    fix_checksums(b);
    write_bytes(dir.file("elf.kiln"), b);
    e = error_of([&] { load_artifact(dir.file("elf.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("was compiled for " + other), std::string::npos) << e.what();
}

TEST(ArtifactCorruption, MissingAndOddFilesAreErrors) {
    ScratchDir dir;
    Error e = error_of([&] { load_artifact(dir.file("missing.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kIOError);
    EXPECT_NE(e.message().find("missing.kiln"), std::string::npos);
    e = error_of([&] { load_artifact(dir.path()); });
    EXPECT_EQ(e.kind(), ErrorKind::kIOError);
    write_bytes(dir.file("empty.kiln"), "");
    e = error_of([&] { load_artifact(dir.file("empty.kiln")); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
}

}  // namespace
}  // namespace kiln::runtime::testing
