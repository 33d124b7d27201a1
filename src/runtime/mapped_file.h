// MappedFile: a whole file mapped read-only into memory, unmapped when the last owner lets go
// (tensors viewing it hold a shared_ptr to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::runtime {

class MappedFile {
public:
    /// Maps `path` read-only (PROT_READ, MAP_PRIVATE). `populate` faults every page in up front
    /// (MAP_POPULATE: one pass in the kernel instead of a fault per page on first touch).
    /// Throws kIOError naming the path when it cannot be opened or mapped.
    static std::shared_ptr<MappedFile> open(const std::string& path, bool populate);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    MappedFile() = default;
    const uint8_t* data_ = nullptr;  // nullptr for an empty file
    size_t size_ = 0;
};

}  // namespace kiln::runtime
