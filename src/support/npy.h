// Reading and writing numpy .npy files (format 1.0/2.0, little-endian, C order) and .npz
// archives (stored, uncompressed or deflate via zlib is NOT supported: np.savez, not savez_compressed).
#pragma once

#include <map>
#include <string>

#include "support/tensor.h"

namespace kiln {

Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& what);
void write_npy(const std::string& path, const Tensor& t);
/// Arrays of an .npz written by np.savez (entries "NAME.npy").
std::map<std::string, Tensor> read_npz(const std::string& path);

}  // namespace kiln
