// ByteWriter / ByteReader: a little-endian binary encoding of integers, doubles and
// length-prefixed strings, for Kiln's file formats (runtime/artifact_format.h).
//
// The reader is for untrusted bytes: every read is bounds-checked and a read past the end
// throws kInvalidModel naming what was being read, where, and how many bytes were left; it
// never touches memory outside [data, data + size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class ByteWriter {
public:
    void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
    void u32(uint32_t v) { put_le(v, 4); }
    void u64(uint64_t v) { put_le(v, 8); }
    void i32(int32_t v) { put_le(static_cast<uint32_t>(v), 4); }
    void i64(int64_t v) { put_le(static_cast<uint64_t>(v), 8); }
    void f64(double v);
    /// A u32 byte count, then the bytes.
    void str(std::string_view s);
    void bytes(const void* data, size_t n) { bytes_.append(static_cast<const char*>(data), n); }
    /// Zero bytes up to the next multiple of `alignment`.
    void pad_to(size_t alignment);
    /// Overwrites 8 bytes at `offset` (already written) with `v`.
    void patch_u64(size_t offset, uint64_t v);

    size_t size() const { return bytes_.size(); }
    const std::string& data() const { return bytes_; }

private:
    void put_le(uint64_t v, int n);
    std::string bytes_;
};

class ByteReader {
public:
    /// Reads [data, data + size); `what` names the bytes in errors ("artifact section 'executable'").
    ByteReader(const void* data, size_t size, std::string what)
        : p_(static_cast<const uint8_t*>(data)), size_(size), what_(std::move(what)) {}

    uint8_t u8(const char* field) { return static_cast<uint8_t>(get_le(1, field)); }
    uint32_t u32(const char* field) { return static_cast<uint32_t>(get_le(4, field)); }
    uint64_t u64(const char* field) { return get_le(8, field); }
    int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
    int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
    double f64(const char* field);
    std::string str(const char* field);
    /// As str, without copying: a view of the reader's bytes.
    std::string_view str_view(const char* field);
    /// A u32 count of items that each take at least `min_item_bytes`: refused (kInvalidModel)
    /// when the bytes left cannot hold that many, so a corrupt count never drives a huge allocation.
    uint32_t count(const char* field, size_t min_item_bytes);
    /// Throws unless every byte was read.
    void expect_end() const;

    size_t offset() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    const std::string& what() const { return what_; }

private:
    const uint8_t* need(size_t n, const char* field);
    uint64_t get_le(int n, const char* field);
    const uint8_t* p_;
    size_t size_;
    size_t pos_ = 0;
    std::string what_;
};

}  // namespace kiln
