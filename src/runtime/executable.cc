// Executable loading: each distinct kernel library is dlopened once (RTLD_NOW | RTLD_LOCAL, so
// missing symbols fail here and kernels of different libraries never interpose), then every
// kernel's symbol is resolved. Libraries stay open as long as the Executable lives.
#include "runtime/executable.h"

#include <dlfcn.h>

#include <map>

#include "support/error.h"

namespace kiln::runtime {

/// An open shared library; dlclose on destruction.
class LoadedLibrary {
public:
    explicit LoadedLibrary(const std::string& path) : path_(path) {
        handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle_ == nullptr) {
            const char* err = dlerror();
            KILN_THROW(kIOError) << "cannot load kernel library '" << path << "': " << (err ? err : "unknown error");
        }
    }
    ~LoadedLibrary() {
        if (handle_) dlclose(handle_);
    }
    LoadedLibrary(const LoadedLibrary&) = delete;
    LoadedLibrary& operator=(const LoadedLibrary&) = delete;

    void* symbol(const std::string& name) const {
        dlerror();
        void* p = dlsym(handle_, name.c_str());
        if (p == nullptr) {
            const char* err = dlerror();
            KILN_THROW(kIOError) << "kernel symbol '" << name << "' not found in '" << path_
                                 << "': " << (err ? err : "null symbol");
        }
        return p;
    }

private:
    std::string path_;
    void* handle_ = nullptr;
};

Executable::~Executable() {
    fns_.clear();
    libs_.clear();
}

void Executable::load() {
    if (!fns_.empty() && fns_.size() == kernels.size()) return;
    std::map<std::string, std::shared_ptr<LoadedLibrary>> by_path;
    std::vector<std::shared_ptr<LoadedLibrary>> libs;
    std::vector<kiln_kernel_fn> fns;
    fns.reserve(kernels.size());
    for (const KernelDesc& k : kernels) {
        if (k.is_async) {  // a runtime built-in (async_kernel.h): nothing to load
            fns.push_back(nullptr);
            continue;
        }
        auto& lib = by_path[k.library];
        if (!lib) {
            lib = std::make_shared<LoadedLibrary>(k.library);
            libs.push_back(lib);
        }
        try {
            fns.push_back(reinterpret_cast<kiln_kernel_fn>(lib->symbol(k.symbol)));
        } catch (Error& e) {
            if (!k.description.empty()) e.add_context("while loading kernel for " + k.description);
            throw;
        }
    }
    libs_ = std::move(libs);
    fns_ = std::move(fns);
}

}  // namespace kiln::runtime
