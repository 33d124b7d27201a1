// CUDA source -> cubin through NVRTC (loaded at run time: runtime/cuda/cuda_api.h; no GPU
// needed), cached like the C kernels: <cache>/cuda/<2 hex>/<key>.cubin with <key>.cu beside it,
// where the key hashes the source, the target architecture and NVRTC's version.
#pragma once

#include <string>
#include <vector>

namespace kiln::codegen {

struct CompiledCubin {
    std::string cubin;  // the ELF image cuModuleLoadData takes
    std::string path;   // where it is cached
    bool from_cache = false;
};

/// Compiles for sm_<arch> (e.g. 90). Throws kUnsupported when NVRTC cannot be loaded (the
/// reason and the directories searched) and kCompileError with NVRTC's log (and the kept
/// source's path) when the source does not compile.
CompiledCubin compile_cuda(const std::string& source, int arch);

/// Registers and static shared memory of one kernel, read from the cubin's ELF sections (the
/// `.nv.info` section's EIATTR_REGCOUNT attribute per function symbol; the `.nv.shared.<entry>`
/// section's size is the static shared memory): what cuobjdump --dump-resource-usage prints,
/// without a GPU. registers is -1 when the image does not record it.
struct KernelResources {
    std::string entry;
    int registers = -1;
    size_t shared_bytes = 0;
};
/// One entry per kernel in the cubin (kCompileError for a malformed image).
std::vector<KernelResources> cubin_resources(const std::string& cubin);

/// "NVRTC 13.0 (/path/libnvrtc.so.13)", or the reason it is unavailable.
std::string nvrtc_description();

}  // namespace kiln::codegen
