// Finding the CUDA shared libraries at run time. A GPU machine may have them in the driver's
// directories, in LD_LIBRARY_PATH, in a toolkit (/usr/local/cuda), or only inside Python's pip
// wheels (nvidia/cu13/lib, nvidia/cublas/lib ...: what PyTorch ships); KILN_CUDA_LIB_DIRS (':'
// separated) is searched first, then a bundle's lib/ beside bin/ (scripts/device_bundle.sh).
#pragma once

#include <string>
#include <vector>

namespace kiln::runtime::cuda {

/// dlopens the first of `sonames` found (each tried in every directory, then by plain name, i.e.
/// LD_LIBRARY_PATH and the system paths); nullptr when none loads, with *tried listing what was
/// tried. *path gets the file that loaded.
void* open_cuda_library(const std::vector<std::string>& sonames, std::string* tried, std::string* path);

/// The directories searched, in order (for messages and docs/gpu.md).
std::vector<std::string> cuda_library_dirs();

}  // namespace kiln::runtime::cuda
