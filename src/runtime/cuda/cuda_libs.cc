#include "runtime/cuda/cuda_libs.h"

#include <dlfcn.h>
#include <glob.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <set>

namespace kiln::runtime::cuda {
namespace {

std::vector<std::string> split_colons(const char* s) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* p = s; p && *p; ++p) {
        if (*p == ':') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += *p;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

void add_glob(const std::string& pattern, std::vector<std::string>& out) {
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
}

/// The directory of the running executable's parent plus "/lib" (a bundle: bin/ and lib/).
std::string bundle_lib_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return "";
    std::string exe(buf, static_cast<size_t>(n));
    size_t slash = exe.rfind('/');
    if (slash == std::string::npos) return "";
    std::string bin = exe.substr(0, slash);
    slash = bin.rfind('/');
    return slash == std::string::npos ? "" : bin.substr(0, slash) + "/lib";
}

}  // namespace

std::vector<std::string> cuda_library_dirs() {
    std::vector<std::string> dirs = split_colons(std::getenv("KILN_CUDA_LIB_DIRS"));
    if (std::string b = bundle_lib_dir(); !b.empty()) dirs.push_back(b);
    // pip wheels (PyTorch's CUDA libraries): virtual environments and system site-packages.
    const char* home = std::getenv("HOME");
    for (const std::string& root : {std::string("/opt/*/.venv/lib/python3*/site-packages"),
                                   std::string("/opt/*/lib/python3*/site-packages"),
                                   std::string("/usr/local/lib/python3*/dist-packages"),
                                   std::string("/usr/local/lib/python3*/site-packages"),
                                   std::string("/usr/lib/python3/dist-packages"),
                                   home ? std::string(home) + "/.local/lib/python3*/site-packages" : std::string()}) {
        if (root.empty()) continue;
        add_glob(root + "/nvidia/cu1*/lib", dirs);
        add_glob(root + "/nvidia/*/lib", dirs);
    }
    // The driver's usual homes (containers: /usr/local/nvidia), then toolkits (never their
    // stubs/ or compat/ directories: a stub or a mismatched compat libcuda cannot open the GPU).
    for (const char* d : {"/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"})
        dirs.push_back(d);
    add_glob("/usr/local/cuda/lib64", dirs);
    add_glob("/usr/local/cuda/lib", dirs);  // cuDNN installed into the toolkit
    add_glob("/usr/local/cuda/targets/x86_64-linux/lib", dirs);
    add_glob("/usr/local/cuda-*/targets/x86_64-linux/lib", dirs);
    std::set<std::string> seen;
    std::vector<std::string> unique;
    for (const std::string& d : dirs)
        if (seen.insert(d).second) unique.push_back(d);
    return unique;
}

void* open_cuda_library(const std::vector<std::string>& sonames, std::string* tried, std::string* path) {
    const std::vector<std::string> dirs = cuda_library_dirs();
    for (const std::string& so : sonames) {
        for (const std::string& d : dirs) {
            const std::string file = d + "/" + so;
            if (access(file.c_str(), R_OK) != 0) continue;
            // NVRTC loads its builtins library by soname, cuBLAS needs cuBLASLt: make the ones
            // beside it resolvable (a pip wheel's directory is on no search path).
            std::vector<std::string> companions;
            if (so.rfind("libnvrtc.so", 0) == 0) add_glob(d + "/libnvrtc-builtins.so.*", companions);
            if (so.rfind("libcublas.so", 0) == 0) add_glob(d + "/libcublasLt.so.*", companions);
            for (const std::string& c : companions) dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
            if (void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
                if (path) *path = file;
                return h;
            }
            if (tried) *tried += file + " (" + dlerror() + "); ";
        }
        if (void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL)) {
            if (path) *path = so;
            return h;
        }
        if (tried) *tried += so + "; ";
    }
    return nullptr;
}

}  // namespace kiln::runtime::cuda
