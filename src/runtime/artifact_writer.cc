// save_artifact: encodes the sections (artifact_format.h), streams them to a temp file beside
// the target with their checksums, writes the header last, then renames over the target, so a
// reader never sees a half-written artifact.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/artifact_format.h"
#include "runtime/cpu_features.h"
#include "runtime/loaded_library.h"
#include "support/byte_io.h"
#include "support/error.h"
#include "support/hash64.h"

namespace kiln::runtime {
namespace {

using namespace artifact_format;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in, kIOError) << "cannot read kernel library '" << path << "': " << std::strerror(errno);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool is_generated(const KernelDesc& k) { return !k.is_async && !k.is_extern(); }

/// The constants are well formed and every generated kernel is exported by the library.
void check_saveable(const Executable& exe, const std::string& library_path) {
    for (const BufferDesc& b : exe.buffers) {
        KILN_CHECK(b.dtype != DType::kString || b.role != BufferRole::kConstant, kUnsupported)
            << "constant '" << b.name << "' holds strings, which a compiled artifact cannot store (its constants "
            << "are mapped from the file; compiled kernels never read strings)";
        KILN_CHECK(b.dtype != DType::kString, kUnsupported)
            << "buffer '" << b.name << "' holds strings, which compiled kernels never read: a compiled artifact "
            << "cannot hold it";
        if (b.role != BufferRole::kConstant) continue;
        KILN_CHECK(b.constant.defined() && b.constant.dtype() == b.dtype && b.constant.nbytes() == b.nbytes(),
                   kInvalidArgument)
            << "constant '" << b.name << "': expected " << dtype_name(b.dtype) << shape_str(b.shape) << " data, got "
            << (b.constant.defined() ? std::string(dtype_name(b.constant.dtype())) + shape_str(b.constant.shape())
                                     : std::string("none"));
    }
    bool any_generated = false;
    for (const KernelDesc& k : exe.kernels) any_generated |= is_generated(k);
    if (!any_generated) return;
    KILN_CHECK(!library_path.empty(), kInvalidArgument)
        << "the executable has generated kernels but no kernel library was given";
    // Every symbol must resolve, as load_artifact will need. An absolute path: dlopen would
    // search the library path for a bare file name.
    LoadedLibrary lib(std::filesystem::absolute(library_path).string(), library_path);
    for (const KernelDesc& k : exe.kernels) {
        if (!is_generated(k)) continue;
        try {
            (void)lib.symbol(k.symbol);
        } catch (const Error&) {
            KILN_THROW(kInvalidArgument) << "kernel library '" << library_path << "' does not export '" << k.symbol
                                         << "' (kernel for " << k.description << ")";
        }
    }
}

/// A file being written; removed on destruction unless committed.
class TempFile {
public:
    explicit TempFile(const std::string& target) : path_(target + ".tmp-XXXXXX") {
        fd_ = mkstemp(path_.data());
        KILN_CHECK(fd_ >= 0, kIOError) << "cannot create '" << path_ << "' to write '" << target
                                       << "': " << std::strerror(errno);
    }
    ~TempFile() {
        if (fd_ >= 0) close(fd_);
        if (!committed_) unlink(path_.c_str());
    }
    void write_at(uint64_t offset, const void* data, size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            ssize_t w = pwrite(fd_, p, n, static_cast<off_t>(offset));
            if (w < 0 && errno == EINTR) continue;
            KILN_CHECK(w > 0, kIOError) << "cannot write '" << path_ << "': " << std::strerror(errno);
            p += w;
            n -= static_cast<size_t>(w);
            offset += static_cast<uint64_t>(w);
        }
    }
    void commit(const std::string& target, uint64_t size) {
        KILN_CHECK(ftruncate(fd_, static_cast<off_t>(size)) == 0 && fsync(fd_) == 0, kIOError)
            << "cannot write '" << path_ << "': " << std::strerror(errno);
        const mode_t mask = umask(0);
        umask(mask);
        (void)fchmod(fd_, 0666 & ~mask);  // mkstemp made it 0600
        close(fd_);
        fd_ = -1;
        KILN_CHECK(std::rename(path_.c_str(), target.c_str()) == 0, kIOError)
            << "cannot rename '" << path_ << "' to '" << target << "': " << std::strerror(errno);
        committed_ = true;
    }

private:
    std::string path_;
    int fd_ = -1;
    bool committed_ = false;
};

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/// The sections' bytes; constants (tensors) are streamed into kConstants, each page-aligned.
struct SectionBytes {
    std::string info, exe, library, program;
    std::vector<const Tensor*> constants;
    uint64_t constants_size = 0;
};

/// Offsets of `constants` in kConstants, in order, each 4096-aligned; returns the section size.
uint64_t place_constants(const std::vector<const Tensor*>& constants, std::vector<uint64_t>& offsets) {
    uint64_t size = 0;
    for (const Tensor* t : constants) {
        offsets.push_back(size);
        size = align_up(size + t->nbytes(), kConstantAlignment);
    }
    return size;
}

/// Writes the header, section table and sections to a temp file and renames it over `path`.
void write_artifact(const std::string& path, const SectionBytes& sb) {
    struct Placed {
        SectionKind kind;
        uint64_t offset, size, checksum;
    };
    std::vector<Placed> sections;
    uint64_t end = kHeaderBytes + kNumSections * kSectionEntryBytes;
    auto place = [&](SectionKind kind, uint64_t size, uint64_t alignment) {
        end = align_up(end, alignment);
        sections.push_back({kind, end, size, 0});
        end += size;
    };
    place(SectionKind::kInfo, sb.info.size(), 8);
    place(SectionKind::kExecutable, sb.exe.size(), 8);
    place(SectionKind::kKernelLibrary, sb.library.size(), 64);
    place(SectionKind::kConstants, sb.constants_size, kConstantAlignment);
    place(SectionKind::kProgram, sb.program.size(), 8);
    const uint64_t file_size = end;

    TempFile out(path);
    auto write_section = [&](Placed& s, const std::string& bytes) {
        out.write_at(s.offset, bytes.data(), bytes.size());
        s.checksum = hash64(bytes.data(), bytes.size());
    };
    write_section(sections[0], sb.info);
    write_section(sections[1], sb.exe);
    write_section(sections[2], sb.library);
    write_section(sections[4], sb.program);
    // Constants: streamed (they may be gigabytes), zero padding hashed with them.
    Hasher64 h;
    const std::string zeros(kConstantAlignment, '\0');
    uint64_t at = 0;
    for (const Tensor* t : sb.constants) {
        out.write_at(sections[3].offset + at, t->data(), t->nbytes());
        h.update(t->data(), t->nbytes());
        at += t->nbytes();
        const uint64_t pad = align_up(at, kConstantAlignment) - at;
        out.write_at(sections[3].offset + at, zeros.data(), pad);
        h.update(zeros.data(), pad);
        at += pad;
    }
    KILN_ICHECK(at == sb.constants_size) << at << " vs " << sb.constants_size;
    sections[3].checksum = h.digest();

    ByteWriter header;
    header.bytes(kMagic, sizeof kMagic);
    header.u32(kFormatVersion);
    header.u32(kNumSections);
    header.u64(file_size);
    header.u64(0);  // header checksum, patched below
    header.pad_to(kHeaderBytes);
    for (const Placed& s : sections) {
        header.u32(static_cast<uint32_t>(s.kind));
        header.u32(0);
        header.u64(s.offset);
        header.u64(s.size);
        header.u64(s.checksum);
    }
    header.patch_u64(kHeaderChecksumOffset, hash64(header.data().data(), header.size()));
    // The padding between sections is left as holes, which read as zeros.
    out.write_at(0, header.data().data(), header.size());
    out.commit(path, file_size);
}

ArtifactInfo with_cpu_features(const ArtifactInfo& info) {
    ArtifactInfo full = info;
    if (full.cpu_features.empty()) full.cpu_features = host_cpu_features();
    return full;
}

/// Per buffer of `exe`: its constant's offset in kConstants (0 for others); adds the constants.
std::vector<uint64_t> add_constants(const Executable& exe, SectionBytes& sb) {
    std::vector<const Tensor*> mine;
    for (const BufferDesc& b : exe.buffers)
        if (b.role == BufferRole::kConstant) mine.push_back(&b.constant);
    std::vector<uint64_t> placed;
    const uint64_t size = place_constants(mine, placed);
    std::vector<uint64_t> offsets(exe.buffers.size(), 0);
    size_t k = 0;
    for (size_t i = 0; i < exe.buffers.size(); ++i)
        if (exe.buffers[i].role == BufferRole::kConstant) offsets[i] = sb.constants_size + placed[k++];
    sb.constants.insert(sb.constants.end(), mine.begin(), mine.end());
    sb.constants_size += size;
    return offsets;
}

/// The one library holding `exe`'s generated kernels ("" when none; two is an error).
std::string library_of(const Executable& exe, const std::string& callee) {
    std::string lib;
    for (const KernelDesc& k : exe.kernels) {
        if (!is_generated(k)) continue;
        KILN_CHECK(lib.empty() || lib == k.library, kInvalidArgument)
            << "executable '" << callee << "' has its kernels in more than one library ('" << lib << "', '"
            << k.library << "'): compile it with CompileOptions::one_library to save it";
        lib = k.library;
    }
    return lib;
}

}  // namespace

void save_artifact(const std::string& path, const Executable& exe, const std::string& kernel_library_path,
                   const ArtifactInfo& info) {
    check_saveable(exe, kernel_library_path);
    SectionBytes sb;
    sb.info = encode_info(with_cpu_features(info));
    const std::vector<uint64_t> offsets = add_constants(exe, sb);
    sb.exe = encode_executable(exe, offsets);
    sb.library = kernel_library_path.empty() ? std::string() : read_file(kernel_library_path);
    write_artifact(path, sb);
}

void save_program_artifact(const std::string& path, const ProgramImage& image, const ArtifactInfo& info) {
    KILN_CHECK(image.executables.size() == image.callee_names.size(), kInvalidArgument)
        << "program image: " << image.executables.size() << " executables but " << image.callee_names.size()
        << " callee names";
    SectionBytes sb;
    sb.info = encode_info(with_cpu_features(info));
    std::vector<std::vector<uint64_t>> offsets;
    std::vector<std::string> libraries;
    for (size_t k = 0; k < image.executables.size(); ++k) {
        const Executable& exe = *image.executables[k];
        const std::string lib = library_of(exe, image.callee_names[k]);
        check_saveable(exe, lib);
        offsets.push_back(add_constants(exe, sb));
        libraries.push_back(lib.empty() ? std::string() : read_file(lib));
    }
    sb.program = encode_program(image, offsets, libraries);
    write_artifact(path, sb);
}

}  // namespace kiln::runtime
