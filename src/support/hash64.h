// A fast non-cryptographic 64-bit hash (XXH3 from the xxHash library) for the checksums of
// file formats: it detects corruption, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln {

/// XXH3-64 of [data, data + n).
uint64_t hash64(const void* data, size_t n);

/// The same hash over bytes given in pieces: update(a); update(b) == hash64(a + b).
class Hasher64 {
public:
    Hasher64();
    ~Hasher64();
    Hasher64(const Hasher64&) = delete;
    Hasher64& operator=(const Hasher64&) = delete;
    void update(const void* data, size_t n);
    uint64_t digest() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace kiln
