// hash64 / Hasher64 over xxHash's XXH3 (header-only use: XXH_INLINE_ALL, nothing to link).
#include "support/hash64.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "support/error.h"

namespace kiln {

uint64_t hash64(const void* data, size_t n) { return XXH3_64bits(data, n); }

struct Hasher64::State {
    XXH3_state_t s;
};

Hasher64::Hasher64() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->s); }
Hasher64::~Hasher64() = default;

void Hasher64::update(const void* data, size_t n) {
    KILN_ICHECK(XXH3_64bits_update(&state_->s, data, n) == XXH_OK);
}

uint64_t Hasher64::digest() const { return XXH3_64bits_digest(&state_->s); }

}  // namespace kiln
