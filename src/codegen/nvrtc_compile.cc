#include "codegen/nvrtc_compile.h"

#include <elf.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "codegen/compile_driver.h"
#include "runtime/cuda/cuda_api.h"
#include "support/error.h"
#include "support/hash64.h"

namespace kiln::codegen {
namespace fs = std::filesystem;
using runtime::cuda::NvrtcApi;

namespace {

const NvrtcApi& nvrtc() {
    std::string why;
    const NvrtcApi* api = runtime::cuda::nvrtc_api(&why);
    KILN_CHECK(api != nullptr, kUnsupported) << "cannot compile CUDA kernels: " << why;
    return *api;
}

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

void write_atomic(const std::string& path, const std::string& bytes) {
    static std::atomic<uint64_t> counter{0};
    fs::create_directories(fs::path(path).parent_path());
    const std::string tmp = path + ".tmp" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    {
        std::ofstream f(tmp, std::ios::binary);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        KILN_CHECK(f.good(), kIOError) << "cannot write '" << tmp << "'";
    }
    KILN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, kIOError) << "cannot rename '" << tmp << "' to '" << path << "'";
}

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/// Runs NVRTC on `source`; the cubin, or throws kCompileError with the log.
std::string run_nvrtc(const NvrtcApi& api, const std::string& source, int arch, const std::string& kept) {
    runtime::cuda::nvrtcProgram prog = nullptr;
    KILN_CHECK(api.nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernel.cu", 0, nullptr, nullptr) == 0, kCompileError)
        << "nvrtcCreateProgram failed";
    const std::string arch_opt = "--gpu-architecture=sm_" + std::to_string(arch);
    const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--fmad=true"};
    int rc = api.nvrtcCompileProgram(prog, 3, opts);
    size_t log_size = 0;
    api.nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) api.nvrtcGetProgramLog(prog, log.data());
    std::string cubin;
    size_t n = 0;
    if (rc == 0 && api.nvrtcGetCUBINSize(prog, &n) == 0 && n > 0) {
        cubin.resize(n);
        if (api.nvrtcGetCUBIN(prog, cubin.data()) != 0) cubin.clear();
    }
    api.nvrtcDestroyProgram(&prog);
    KILN_CHECK(rc == 0, kCompileError) << "NVRTC failed (" << api.nvrtcGetErrorString(rc) << ") on the CUDA source kept at "
                                       << kept << ":\n" << log;
    KILN_CHECK(!cubin.empty(), kCompileError) << "NVRTC produced no cubin for " << kept;
    return cubin;
}

}  // namespace

std::string nvrtc_description() {
    std::string why;
    const NvrtcApi* api = runtime::cuda::nvrtc_api(&why);
    if (!api) return "NVRTC unavailable: " + why;
    int major = 0, minor = 0;
    api->nvrtcVersion(&major, &minor);
    return "NVRTC " + std::to_string(major) + "." + std::to_string(minor) + " (" + api->library + ")";
}

CompiledCubin compile_cuda(const std::string& source, int arch) {
    const NvrtcApi& api = nvrtc();
    int major = 0, minor = 0;
    api.nvrtcVersion(&major, &minor);
    const std::string salt = "|sm_" + std::to_string(arch) + "|nvrtc " + std::to_string(major) + "." + std::to_string(minor);
    const std::string text = source + salt, text2 = salt + source;  // two 64-bit hashes: a 128-bit key
    const std::string key = hex64(hash64(text.data(), text.size())) + hex64(hash64(text2.data(), text2.size()));
    const std::string dir = cache_dir() + "/cuda/" + key.substr(0, 2);
    CompiledCubin out;
    out.path = dir + "/" + key + ".cubin";
    if (fs::exists(out.path)) {
        out.cubin = read_all(out.path);
        out.from_cache = !out.cubin.empty();
        if (out.from_cache) return out;
    }
    const std::string kept = dir + "/" + key + ".cu";
    write_atomic(kept, source);
    out.cubin = run_nvrtc(api, source, arch, kept);
    write_atomic(out.path, out.cubin);
    return out;
}

std::vector<KernelResources> cubin_resources(const std::string& cubin) {
    KILN_CHECK(cubin.size() >= sizeof(Elf64_Ehdr) && std::memcmp(cubin.data(), ELFMAG, SELFMAG) == 0, kCompileError)
        << "cubin is not an ELF image";
    Elf64_Ehdr eh;
    std::memcpy(&eh, cubin.data(), sizeof(eh));
    KILN_CHECK(eh.e_shoff + static_cast<size_t>(eh.e_shnum) * sizeof(Elf64_Shdr) <= cubin.size() && eh.e_shstrndx < eh.e_shnum,
               kCompileError) << "cubin has a malformed section table";
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    std::memcpy(sh.data(), cubin.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
    auto cstr = [&](size_t at) { return at < cubin.size() ? std::string(cubin.c_str() + at) : std::string(); };
    auto name_of = [&](const Elf64_Shdr& s) { return cstr(sh[eh.e_shstrndx].sh_offset + s.sh_name); };
    auto in_image = [&](const Elf64_Shdr& s) { return s.sh_offset + s.sh_size <= cubin.size(); };
    std::vector<KernelResources> out;
    std::vector<std::string> symbols;  // .symtab names by index
    for (const Elf64_Shdr& s : sh) {
        const std::string n = name_of(s);
        if (n.rfind(".text.", 0) == 0) out.push_back({n.substr(6), -1, 0});
        if (s.sh_type == SHT_SYMTAB && in_image(s) && s.sh_link < sh.size())
            for (size_t i = 0; i < s.sh_size / sizeof(Elf64_Sym); ++i) {
                Elf64_Sym sym;
                std::memcpy(&sym, cubin.data() + s.sh_offset + i * sizeof(Elf64_Sym), sizeof(sym));
                symbols.push_back(cstr(sh[s.sh_link].sh_offset + sym.st_name));
            }
    }
    auto find = [&](const std::string& entry) -> KernelResources* {
        for (KernelResources& k : out)
            if (k.entry == entry) return &k;
        return nullptr;
    };
    for (const Elf64_Shdr& s : sh) {
        const std::string n = name_of(s);
        if (n.rfind(".nv.shared.", 0) == 0 && find(n.substr(11))) find(n.substr(11))->shared_bytes = s.sh_size;
        if (n != ".nv.info" || !in_image(s)) continue;
        // Attributes {u8 format, u8 attribute, u16 value-or-size}; format 4 has `size` payload
        // bytes. EIATTR_REGCOUNT (0x2f): payload {u32 function symbol, u32 registers}.
        for (size_t p = s.sh_offset; p + 4 <= s.sh_offset + s.sh_size;) {
            const uint8_t format = static_cast<uint8_t>(cubin[p]), attr = static_cast<uint8_t>(cubin[p + 1]);
            uint16_t size = 0;
            std::memcpy(&size, cubin.data() + p + 2, 2);
            if (format == 4 && attr == 0x2f && size == 8 && p + 12 <= cubin.size()) {
                uint32_t sym = 0, regs = 0;
                std::memcpy(&sym, cubin.data() + p + 4, 4);
                std::memcpy(&regs, cubin.data() + p + 8, 4);
                if (sym < symbols.size() && find(symbols[sym])) find(symbols[sym])->registers = static_cast<int>(regs);
            }
            p += 4 + (format == 4 ? size : 0);
        }
    }
    return out;
}

}  // namespace kiln::codegen
