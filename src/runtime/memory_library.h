// Loading a shared library from bytes in memory (the kernel library embedded in a compiled
// artifact), without leaving a file behind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/loaded_library.h"

namespace kiln::runtime {

/// Loads the ELF shared library held in [data, data + size): written to an anonymous memfd and
/// dlopened as /proc/self/fd/N (the fd stays open while the library is loaded, so no two live
/// libraries share that name); where memfds cannot be created or executed, a private temp file
/// in $TMPDIR (else /tmp), removed once loaded. `name` names it in errors. Throws kUnsupported
/// (an ELF file for another machine), kInvalidModel (not a 64-bit ELF file), kIOError.
/// `allow_memfd` false goes straight to the temp file (tests of that route).
std::shared_ptr<LoadedLibrary> load_library_from_memory(const void* data, size_t size, const std::string& name,
                                                        bool allow_memfd = true);

}  // namespace kiln::runtime
