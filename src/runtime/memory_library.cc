// load_library_from_memory: memfd_create + dlopen("/proc/self/fd/N"), the way a process loads
// code it holds in memory; a temp file (unlinked right after dlopen) where that fails.
//
// NOTE: glibc's dlopen matches an already loaded object by its path name before opening the
// file, so a reused /proc/self/fd/N name could hand back an older library. The memfd stays
// open as long as its library is loaded (the number cannot be reused meanwhile), and a name
// that dlopen(RTLD_NOLOAD) already knows (a library kept loaded past dlclose) falls back to
// the temp file, whose name is unique.
#include "runtime/memory_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "support/error.h"

namespace kiln::runtime {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // not checked
#endif

const char* machine_name(uint16_t m) {
    switch (m) {
        case EM_X86_64: return "x86_64";
        case EM_AARCH64: return "aarch64";
        case EM_386: return "i386";
        case EM_ARM: return "arm";
        case EM_RISCV: return "riscv";
        case EM_PPC64: return "ppc64";
        default: return "unknown";
    }
}

/// The ELF header says a 64-bit little-endian shared object for this machine.
void check_elf(const void* data, size_t size, const std::string& name) {
    KILN_CHECK(size >= sizeof(Elf64_Ehdr), kInvalidModel)
        << "kernel library '" << name << "' is " << size << " bytes, too short for an ELF header";
    Elf64_Ehdr h;
    std::memcpy(&h, data, sizeof h);
    KILN_CHECK(std::memcmp(h.e_ident, ELFMAG, SELFMAG) == 0, kInvalidModel)
        << "kernel library '" << name << "' is not an ELF file (bad magic)";
    KILN_CHECK(h.e_ident[EI_CLASS] == ELFCLASS64 && h.e_ident[EI_DATA] == ELFDATA2LSB, kUnsupported)
        << "kernel library '" << name << "' is not a 64-bit little-endian ELF file";
    KILN_CHECK(kHostMachine == EM_NONE || h.e_machine == kHostMachine, kUnsupported)
        << "kernel library '" << name << "' was compiled for " << machine_name(h.e_machine) << " (ELF machine "
        << h.e_machine << "), this host is " << machine_name(kHostMachine);
}

bool write_all(int fd, const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

/// memfd route; nullptr when it is not available here (then the caller falls back).
std::shared_ptr<LoadedLibrary> load_via_memfd(const void* data, size_t size, const std::string& name) {
    int fd = memfd_create("kiln-kernels", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (!write_all(fd, data, size)) {
        close(fd);
        return nullptr;
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    if (void* old = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
        dlclose(old);  // that name belongs to a library still loaded: use a unique file name
        close(fd);
        return nullptr;
    }
    try {
        return std::make_shared<LoadedLibrary>(path, name, fd);  // owns fd from here
    } catch (const Error&) {
        return nullptr;  // e.g. memfds not executable (vm.memfd_noexec): try the temp file
    }
}

std::shared_ptr<LoadedLibrary> load_via_temp_file(const void* data, size_t size, const std::string& name) {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/kiln-kernels-XXXXXX.so";
    int fd = mkstemps(tmpl.data(), 3);
    KILN_CHECK(fd >= 0, kIOError) << "cannot create a temp file for kernel library '" << name << "' ('" << tmpl
                                  << "'): " << std::strerror(errno);
    const bool ok = write_all(fd, data, size);
    const int err = errno;
    close(fd);
    if (!ok) {
        unlink(tmpl.c_str());
        KILN_THROW(kIOError) << "cannot write kernel library '" << name << "' to '" << tmpl << "': " << std::strerror(err);
    }
    try {
        auto lib = std::make_shared<LoadedLibrary>(tmpl, name);
        unlink(tmpl.c_str());  // the mapping stays; no file is left behind
        return lib;
    } catch (...) {
        unlink(tmpl.c_str());
        throw;
    }
}

}  // namespace

std::shared_ptr<LoadedLibrary> load_library_from_memory(const void* data, size_t size, const std::string& name,
                                                        bool allow_memfd) {
    check_elf(data, size, name);
    if (allow_memfd)
        if (auto lib = load_via_memfd(data, size, name)) return lib;
    return load_via_temp_file(data, size, name);
}

}  // namespace kiln::runtime
