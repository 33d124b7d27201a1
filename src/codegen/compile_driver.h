// The compile driver: C source -> shared library through the system compiler, with a
// content-addressed on-disk cache. The key hashes the source, the compiler's identity and the
// flags; a hit compiles nothing.
//
// Cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
// Compiler: $KILN_CC, else cc. Flags: -O3 -march=native -fPIC -shared -std=c11.
#pragma once

#include <string>
#include <vector>

namespace kiln::codegen {

struct CompiledLibrary {
    std::string path;     // the .so in the cache
    bool from_cache = false;
};

std::string cache_dir();

/// Compiles (or finds in the cache) one translation unit. Throws kCompileError with the
/// compiler's diagnostics (and the path of the kept source) on failure.
CompiledLibrary compile_c(const std::string& source);

/// Compiles several sources, up to `jobs` compiler processes at once (0 = number of cores).
std::vector<CompiledLibrary> compile_c_many(const std::vector<std::string>& sources, int jobs = 0);

}  // namespace kiln::codegen
