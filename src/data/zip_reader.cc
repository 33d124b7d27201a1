// A zip reader for .npz archives. The central directory at the end of the file is the
// authority for sizes and offsets (np.savez writes zip64 placeholders into the local headers);
// the local header is read only to find where a member's data begins. Every length read from
// the file is bounds-checked before use, so a truncated or corrupt archive is a kiln::Error,
// never a crash or a huge allocation.
#include "data/zip_reader.h"

#include <zlib.h>

#include <fstream>
#include <iterator>

#include "support/error.h"

namespace kiln::data {
namespace {

uint64_t le(const std::string& b, size_t off, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
    return v;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    KILN_CHECK(f.good(), kIOError) << "cannot open '" << path << "' for reading";
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    KILN_CHECK(!f.bad(), kIOError) << "error reading '" << path << "'";
    return bytes;
}

// Raw deflate (zip members carry no zlib header: windowBits -15) of exactly `usize` bytes.
std::string inflate_raw(const char* data, size_t csize, uint64_t usize, const std::string& what) {
    std::string out(usize, '\0');
    z_stream zs{};
    KILN_CHECK(inflateInit2(&zs, -MAX_WBITS) == Z_OK, kInternal) << "bug in Kiln: inflateInit2 failed";
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    zs.avail_in = static_cast<uInt>(csize);
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(usize);
    int rc = inflate(&zs, Z_FINISH);
    uint64_t produced = zs.total_out;
    std::string msg = zs.msg ? zs.msg : "";
    inflateEnd(&zs);
    KILN_CHECK(rc == Z_STREAM_END && produced == usize, kInvalidArgument)
        << what << ": corrupt deflate data (zlib: " << (msg.empty() ? std::to_string(rc) : msg)
        << "; inflated " << produced << " of " << usize << " bytes)";
    return out;
}

}  // namespace

std::vector<ZipMember> read_zip(const std::string& path) {
    std::string b = slurp(path);
    // End of central directory record: 22 bytes plus a comment of up to 65535 bytes.
    size_t eocd = std::string::npos;
    if (b.size() >= 22)
        for (size_t i = b.size() - 22 + 1; i-- > 0 && b.size() - i <= 22 + 65535;)
            if (le(b, i, 4) == 0x06054b50u) {
                eocd = i;
                break;
            }
    KILN_CHECK(eocd != std::string::npos, kInvalidArgument)
        << "'" << path << "' is not a zip (.npz) archive (no end of central directory)";
    uint64_t count = le(b, eocd + 10, 2), cd_size = le(b, eocd + 12, 4), cd_off = le(b, eocd + 16, 4);
    if (cd_off == 0xFFFFFFFFu || count == 0xFFFFu || cd_size == 0xFFFFFFFFu) {
        // zip64: a locator 20 bytes before the EOCD points at the zip64 EOCD record.
        KILN_CHECK(eocd >= 20 && le(b, eocd - 20, 4) == 0x07064b50u, kInvalidArgument)
            << "'" << path << "': zip64 archive without a zip64 locator";
        uint64_t z = le(b, eocd - 20 + 8, 8);
        KILN_CHECK(z <= b.size() && b.size() - z >= 56 && le(b, z, 4) == 0x06064b50u, kInvalidArgument)
            << "'" << path << "': bad zip64 end of central directory";
        count = le(b, z + 32, 8);
        cd_size = le(b, z + 40, 8);
        cd_off = le(b, z + 48, 8);
    }
    KILN_CHECK(cd_off <= b.size() && cd_size <= b.size() - cd_off, kInvalidArgument)
        << "'" << path << "': central directory lies outside the file";
    std::vector<ZipMember> out;
    size_t p = cd_off;
    for (uint64_t e = 0; e < count; ++e) {
        KILN_CHECK(p <= b.size() && b.size() - p >= 46 && le(b, p, 4) == 0x02014b50u, kInvalidArgument)
            << "'" << path << "': bad central directory entry " << e;
        uint64_t method = le(b, p + 10, 2), crc = le(b, p + 16, 4);
        uint64_t csize = le(b, p + 20, 4), usize = le(b, p + 24, 4), local = le(b, p + 42, 4);
        size_t name_len = le(b, p + 28, 2), extra_len = le(b, p + 30, 2), comment_len = le(b, p + 32, 2);
        KILN_CHECK(b.size() - p - 46 >= name_len + extra_len + comment_len, kInvalidArgument)
            << "'" << path << "': central directory entry " << e << " runs past the end of the file";
        std::string name = b.substr(p + 46, name_len);
        // zip64 extra field (id 1): 8-byte values for the saturated fields, in this order.
        for (size_t x = p + 46 + name_len, xe = x + extra_len; x + 4 <= xe;) {
            uint64_t id = le(b, x, 2), sz = le(b, x + 2, 2);
            size_t q = x + 4, qe = std::min<size_t>(q + sz, xe);
            if (id == 0x0001)
                for (uint64_t* f : {&usize, &csize, &local})
                    if (*f == 0xFFFFFFFFu && q + 8 <= qe) {
                        *f = le(b, q, 8);
                        q += 8;
                    }
            x += 4 + sz;
        }
        p += 46 + name_len + extra_len + comment_len;
        std::string what = "'" + path + "' member '" + name + "'";
        KILN_CHECK(method == 0 || method == 8, kUnsupported)
            << what << " uses zip compression method " << method
            << " (supported: 0 stored, 8 deflate)";
        KILN_CHECK(local <= b.size() && b.size() - local >= 30 && le(b, local, 4) == 0x04034b50u,
                   kInvalidArgument)
            << what << ": bad local header offset " << local;
        uint64_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
        KILN_CHECK(data <= b.size() && csize <= b.size() - data, kInvalidArgument)
            << what << ": data runs past the end of the file";
        ZipMember m{name, {}};
        if (method == 0) {
            KILN_CHECK(csize == usize, kInvalidArgument)
                << what << ": stored member with different sizes (" << csize << " vs " << usize << ")";
            m.bytes = b.substr(data, csize);
        } else {
            // A deflate stream expands at most ~1032x; a larger claim is a corrupt header, and
            // refusing it avoids allocating gigabytes for a bogus size.
            KILN_CHECK(usize / 1032 <= csize + 1, kInvalidArgument)
                << what << ": implausible uncompressed size " << usize << " for " << csize
                << " compressed bytes";
            KILN_CHECK(csize < (1ull << 32) && usize < (1ull << 32), kUnsupported)
                << what << ": compressed members of 4 GiB or more are not supported";
            m.bytes = inflate_raw(b.data() + data, csize, usize, what);
        }
        uint64_t got = ::crc32_z(0L, reinterpret_cast<const Bytef*>(m.bytes.data()), m.bytes.size());
        KILN_CHECK(got == crc, kInvalidArgument) << what << ": CRC mismatch (corrupt archive)";
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace kiln::data
