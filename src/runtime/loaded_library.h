// LoadedLibrary: one dlopened shared library (kernels), closed when the last owner lets go.
#pragma once

#include <string>

namespace kiln::runtime {

class LoadedLibrary {
public:
    /// dlopens `path` with RTLD_NOW | RTLD_LOCAL (missing symbols fail here; kernels of different
    /// libraries never interpose). `name` names it in errors (default: the path). `owned_fd`, when
    /// >= 0, is closed after dlclose (a memfd whose /proc/self/fd path was opened). Throws kIOError.
    explicit LoadedLibrary(const std::string& path, std::string name = "", int owned_fd = -1);
    ~LoadedLibrary();
    LoadedLibrary(const LoadedLibrary&) = delete;
    LoadedLibrary& operator=(const LoadedLibrary&) = delete;

    /// The address of exported `symbol`; kIOError naming it and the library when absent.
    void* symbol(const std::string& symbol) const;
    const std::string& name() const { return name_; }

private:
    std::string name_;
    void* handle_ = nullptr;
    int owned_fd_ = -1;
};

}  // namespace kiln::runtime
