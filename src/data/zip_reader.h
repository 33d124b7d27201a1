// Reading the members of a zip archive (an .npz): stored members and deflate-compressed ones
// (np.savez_compressed), each checked against its CRC-32.
#pragma once

#include <string>
#include <vector>

namespace kiln::data {

struct ZipMember {
    std::string name;
    std::string bytes;  // uncompressed contents
};

/// Every member of the archive at `path`, in central-directory order. A file that is not a zip,
/// a member with an unsupported compression method, or a corrupt member throws kiln::Error
/// naming the file and the member.
std::vector<ZipMember> read_zip(const std::string& path);

}  // namespace kiln::data
