// load_artifact: maps the file once; checks the header (magic, version, size, checksum), the
// section table (kinds, bounds, overlap) and every section's checksum; refuses a CPU that lacks
// a feature the kernels were compiled for (before any of their code is loaded); decodes the
// tables; makes each constant a view of the mapping; loads the kernel library from memory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/artifact_format.h"
#include "runtime/cpu_features.h"
#include "runtime/mapped_file.h"
#include "runtime/memory_library.h"
#include "support/byte_io.h"
#include "support/error.h"
#include "support/hash64.h"

namespace kiln::runtime {
namespace {

using namespace artifact_format;

struct Section {
    uint32_t kind = 0;
    uint64_t offset = 0, size = 0, checksum = 0;
};

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

/// The section table, indexed by kind - 1, after every header check.
std::vector<Section> read_header(const MappedFile& m, const std::string& path) {
    const size_t size = m.size();
    KILN_CHECK(size >= sizeof kMagic, kInvalidModel)
        << "'" << path << "' is not a Kiln artifact: it is " << size << " bytes, shorter than the 8-byte magic";
    KILN_CHECK(std::memcmp(m.data(), kMagic, sizeof kMagic) == 0, kInvalidModel)
        << "'" << path << "' is not a Kiln artifact (no artifact magic at its start)";
    ByteReader r(m.data(), std::min<size_t>(size, kHeaderBytes + kNumSections * kSectionEntryBytes),
                 "the artifact header of '" + path + "'");
    (void)r.u64("magic");
    const uint32_t version = r.u32("format version");
    KILN_CHECK(version == kFormatVersion, kUnsupported)
        << "'" << path << "' is a Kiln artifact of format version " << version << "; this runtime reads version "
        << kFormatVersion << " (recompile the model with this Kiln's `kiln compile`)";
    const uint32_t count = r.u32("section count");
    const uint64_t file_size = r.u64("file size");
    KILN_CHECK(size >= file_size, kInvalidModel)
        << "'" << path << "' is truncated: the artifact header says " << file_size << " bytes, the file has " << size;
    KILN_CHECK(size == file_size, kInvalidModel)
        << "'" << path << "' is corrupt: the artifact header says " << file_size << " bytes, the file has " << size;
    KILN_CHECK(count == kNumSections, kInvalidModel)
        << "'" << path << "' is corrupt: the artifact header lists " << count << " sections, expected " << kNumSections;
    const uint64_t checksum = r.u64("header checksum");
    const size_t header_end = kHeaderBytes + kNumSections * kSectionEntryBytes;
    KILN_CHECK(size >= header_end, kInvalidModel)
        << "'" << path << "' is truncated: " << size << " bytes, the artifact header and section table take " << header_end;
    std::string header(reinterpret_cast<const char*>(m.data()), header_end);
    std::memset(header.data() + kHeaderChecksumOffset, 0, 8);
    const uint64_t got = hash64(header.data(), header.size());
    KILN_CHECK(got == checksum, kInvalidModel) << "'" << path << "' is corrupt: artifact header checksum mismatch (expected "
                                               << hex(checksum) << ", got " << hex(got) << ")";
    ByteReader t(m.data() + kHeaderBytes, kNumSections * kSectionEntryBytes, "the artifact section table of '" + path + "'");
    std::vector<Section> sections(kNumSections);
    std::vector<bool> seen(kNumSections, false);
    for (uint32_t i = 0; i < kNumSections; ++i) {
        Section s;
        s.kind = t.u32("section kind");
        const uint32_t reserved = t.u32("section reserved field");
        s.offset = t.u64("section offset");
        s.size = t.u64("section size");
        s.checksum = t.u64("section checksum");
        KILN_CHECK(s.kind >= 1 && s.kind <= kNumSections && !seen[s.kind - 1] && reserved == 0, kInvalidModel)
            << "'" << path << "' is corrupt: section table entry " << i << " has kind " << s.kind << " (reserved "
            << reserved << "), expected each of kinds 1.." << kNumSections << " once";
        seen[s.kind - 1] = true;
        KILN_CHECK(s.offset >= header_end && s.offset <= size && s.size <= size - s.offset, kInvalidModel)
            << "'" << path << "' is corrupt: section '" << section_name(s.kind) << "' at offset " << s.offset << " ("
            << s.size << " bytes) is not inside the file's " << size << " bytes after the header";
        sections[s.kind - 1] = s;
    }
    const Section& c = sections[static_cast<uint32_t>(SectionKind::kConstants) - 1];
    KILN_CHECK(c.offset % kConstantAlignment == 0, kInvalidModel)
        << "'" << path << "' is corrupt: the constants section starts at offset " << c.offset << ", expected a multiple of "
        << kConstantAlignment;
    std::vector<Section> by_offset = sections;
    std::sort(by_offset.begin(), by_offset.end(), [](const Section& a, const Section& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < by_offset.size(); ++i)
        KILN_CHECK(by_offset[i - 1].offset + by_offset[i - 1].size <= by_offset[i].offset, kInvalidModel)
            << "'" << path << "' is corrupt: sections '" << section_name(by_offset[i - 1].kind) << "' and '"
            << section_name(by_offset[i].kind) << "' overlap";
    return sections;
}

void check_checksum(const MappedFile& m, const Section& s, const std::string& path) {
    const uint64_t got = hash64(m.data() + s.offset, s.size);
    KILN_CHECK(got == s.checksum, kInvalidModel)
        << "'" << path << "' is corrupt: section '" << section_name(s.kind) << "' (" << s.size << " bytes at offset "
        << s.offset << ") checksum mismatch (expected " << hex(s.checksum) << ", got " << hex(got) << ")";
}

void check_cpu(const ArtifactInfo& info, const std::string& path) {
    const std::vector<std::string> missing = missing_cpu_features(info.cpu_features);
    if (missing.empty()) return;
    std::string names, host;
    for (const std::string& f : missing) names += (names.empty() ? "" : ", ") + f;
    for (const std::string& f : host_cpu_features()) host += (host.empty() ? "" : " ") + f;
    KILN_THROW(kUnsupported) << "'" << path << "' was compiled for CPU features this CPU lacks: " << names
                             << " (this CPU: " << host << "); compile the model on (or for) this machine";
}

}  // namespace

namespace artifact_format {

void attach_kernels(Executable& exe, const uint8_t* lib_bytes, size_t lib_size, const std::string& name,
                    const std::string& path) {
    std::vector<size_t> generated;
    for (size_t k = 0; k < exe.kernels.size(); ++k)
        if (!exe.kernels[k].is_async && !exe.kernels[k].is_extern()) generated.push_back(k);
    if (generated.empty()) return;
    KILN_CHECK(lib_size > 0, kInvalidModel) << "'" << path << "' is corrupt: " << generated.size()
                                            << " generated kernels but an empty kernel library (" << name << ")";
    std::shared_ptr<LoadedLibrary> lib = load_library_from_memory(lib_bytes, lib_size, name);
    for (size_t k : generated) {
        KernelDesc& desc = exe.kernels[k];
        try {
            (void)lib->symbol(desc.symbol);
        } catch (const Error& e) {
            KILN_THROW(kInvalidModel) << "'" << path << "' is corrupt: " << e.message() << " (kernel for "
                                      << desc.description << ")";
        }
        desc.library = name;
    }
    exe.provide_library(name, lib);
}

}  // namespace artifact_format

bool is_artifact_file(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[sizeof kMagic];
    const ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n == static_cast<ssize_t>(sizeof buf) && std::memcmp(buf, kMagic, sizeof buf) == 0;
}

LoadedArtifact load_artifact(const std::string& path) {
    // Not MAP_POPULATE: the checksums touch every page anyway, and measured (100 MB, warm page
    // cache) populating up front was no faster than the faults of that first pass (~7 ms total).
    std::shared_ptr<MappedFile> m = MappedFile::open(path, /*populate=*/false);
    const std::vector<Section> sections = read_header(*m, path);
    for (const Section& s : sections) check_checksum(*m, s, path);
    auto at = [&](SectionKind k) -> const Section& { return sections[static_cast<uint32_t>(k) - 1]; };

    LoadedArtifact out;
    try {
        const Section& info = at(SectionKind::kInfo);
        out.info = decode_info(m->data() + info.offset, info.size);
        check_cpu(out.info, path);
        const Section& c = at(SectionKind::kConstants);
        const uint8_t* constants = m->data() + c.offset;
        ConstantView view = [&](DType dtype, const Shape& shape, uint64_t offset) {
            // Aliasing shared_ptr: the tensor keeps the whole mapping alive, nothing is copied.
            void* p = const_cast<uint8_t*>(constants + offset);
            return Tensor::from_storage(dtype, shape, std::shared_ptr<void>(m, p));
        };
        const Section& prog = at(SectionKind::kProgram);
        if (prog.size > 0) {
            const Section& e = at(SectionKind::kExecutable);
            const Section& l = at(SectionKind::kKernelLibrary);
            KILN_CHECK(e.size == 0 && l.size == 0, kInvalidModel)
                << "'" << path << "' is corrupt: it holds a program and also a top-level executable (" << e.size
                << " bytes) or kernel library (" << l.size << " bytes), expected neither";
            out.program = decode_program(m->data() + prog.offset, prog.size, c.size, view, path);
        } else {
            const Section& e = at(SectionKind::kExecutable);
            out.exe = decode_executable(m->data() + e.offset, e.size, c.size, view);
            const Section& l = at(SectionKind::kKernelLibrary);
            attach_kernels(*out.exe, m->data() + l.offset, l.size, path + "#kernels", path);
            out.exe->load();
        }
    } catch (Error& err) {
        err.add_context("while loading artifact '" + path + "'");
        throw;
    }
    return out;
}

}  // namespace kiln::runtime
