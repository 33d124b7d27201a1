#include "runtime/loaded_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include "support/error.h"

namespace kiln::runtime {

LoadedLibrary::LoadedLibrary(const std::string& path, std::string name, int owned_fd)
    : name_(name.empty() ? path : std::move(name)), owned_fd_(owned_fd) {
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
        const char* err = dlerror();
        if (owned_fd_ >= 0) close(owned_fd_);
        KILN_THROW(kIOError) << "cannot load kernel library '" << name_ << "': " << (err ? err : "unknown error");
    }
}

LoadedLibrary::~LoadedLibrary() {
    if (handle_) dlclose(handle_);
    if (owned_fd_ >= 0) close(owned_fd_);
}

void* LoadedLibrary::symbol(const std::string& symbol) const {
    dlerror();
    void* p = dlsym(handle_, symbol.c_str());
    if (p == nullptr) {
        const char* err = dlerror();
        KILN_THROW(kIOError) << "kernel symbol '" << symbol << "' not found in '" << name_
                             << "': " << (err ? err : "null symbol");
    }
    return p;
}

}  // namespace kiln::runtime
