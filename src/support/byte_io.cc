#include "support/byte_io.h"

#include <cstring>

#include "support/error.h"

namespace kiln {

void ByteWriter::put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void ByteWriter::f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
}

void ByteWriter::str(std::string_view s) {
    KILN_CHECK(s.size() <= UINT32_MAX, kInvalidArgument) << "string of " << s.size() << " bytes is too long to encode";
    u32(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
}

void ByteWriter::pad_to(size_t alignment) {
    size_t rem = bytes_.size() % alignment;
    if (rem) bytes_.append(alignment - rem, '\0');
}

void ByteWriter::patch_u64(size_t offset, uint64_t v) {
    KILN_ICHECK(offset + 8 <= bytes_.size()) << "patch at " << offset << " of " << bytes_.size();
    for (int i = 0; i < 8; ++i) bytes_[offset + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

const uint8_t* ByteReader::need(size_t n, const char* field) {
    KILN_CHECK(n <= size_ - pos_, kInvalidModel)
        << what_ << " is truncated: reading " << field << " needs " << n << " bytes at offset " << pos_ << ", "
        << (size_ - pos_) << " left";
    const uint8_t* p = p_ + pos_;
    pos_ += n;
    return p;
}

uint64_t ByteReader::get_le(int n, const char* field) {
    const uint8_t* p = need(static_cast<size_t>(n), field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

double ByteReader::f64(const char* field) {
    uint64_t bits = u64(field);
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

std::string ByteReader::str(const char* field) { return std::string(str_view(field)); }

std::string_view ByteReader::str_view(const char* field) {
    uint32_t n = u32(field);
    const uint8_t* p = need(n, field);
    return std::string_view(reinterpret_cast<const char*>(p), n);
}

uint32_t ByteReader::count(const char* field, size_t min_item_bytes) {
    uint32_t n = u32(field);
    KILN_CHECK(min_item_bytes == 0 || n <= remaining() / min_item_bytes, kInvalidModel)
        << what_ << " is corrupt: " << field << " is " << n << " but only " << remaining()
        << " bytes are left (each takes at least " << min_item_bytes << ")";
    return n;
}

void ByteReader::expect_end() const {
    KILN_CHECK(pos_ == size_, kInvalidModel)
        << what_ << " is corrupt: " << (size_ - pos_) << " unread bytes after offset " << pos_ << " of " << size_;
}

}  // namespace kiln
