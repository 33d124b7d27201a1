// numpy .npy / .npz reading and writing.
//
// .npy: magic "\x93NUMPY", version (1.0: u16 header length; 2.0/3.0: u32), then a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a
// multiple of 64 bytes and ended by '\n', then the raw little-endian C-order data.
// .npz: a zip archive, one "NAME.npy" per array. We read the central directory (the local
// headers np.savez writes carry zip64 placeholders, the central entries carry real sizes),
// accept only stored entries, and check each entry's CRC-32. Every length read from a file is
// bounds-checked before use: bad bytes give kiln::Error, never a crash or a huge allocation.
#include "support/npy.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "support/error.h"

namespace kiln {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    KILN_CHECK(f.good(), kIOError) << "cannot open '" << path << "' for reading";
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    KILN_CHECK(!f.bad(), kIOError) << "error reading '" << path << "'";
    return bytes;
}

uint32_t le(const std::string& b, size_t off, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
    return v;
}
uint64_t le64(const std::string& b, size_t off) {
    return le(b, off, 4) | (static_cast<uint64_t>(le(b, off + 4, 4)) << 32);
}

// Minimal reader of the header dict: string, True/False and int-tuple values.
class HeaderParser {
public:
    HeaderParser(std::string_view s, const std::string& what) : s_(s), what_(what) {}

    void parse(std::string& descr, bool& fortran, Shape& shape) {
        bool has_descr = false, has_fortran = false, has_shape = false;
        expect('{');
        while (!peek_is('}')) {
            std::string key = quoted();
            expect(':');
            if (key == "descr") {
                KILN_CHECK(peek_is('\'') || peek_is('"'), kUnsupported)
                    << what_
                    << ": structured numpy dtypes are not supported (descr is not a simple string)";
                descr = quoted();
                has_descr = true;
            } else if (key == "fortran_order") {
                fortran = boolean();
                has_fortran = true;
            } else if (key == "shape") {
                shape = tuple();
                has_shape = true;
            } else {
                fail("a key 'descr', 'fortran_order' or 'shape'");
            }
            if (!peek_is('}')) expect(',');
        }
        expect('}');
        KILN_CHECK(has_descr && has_fortran && has_shape, kInvalidArgument)
            << what_ << ": .npy header lacks one of 'descr', 'fortran_order', 'shape'";
    }

private:
    void skip() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t')) ++i_;
    }
    bool peek_is(char c) {
        skip();
        return i_ < s_.size() && s_[i_] == c;
    }
    [[noreturn]] void fail(const char* expected) {
        KILN_THROW(kInvalidArgument)
            << what_ << ": malformed .npy header at offset " << i_ << ": expected " << expected;
    }
    void expect(char c) {
        if (!peek_is(c)) fail((std::string("'") + c + "'").c_str());
        ++i_;
    }
    std::string quoted() {
        skip();
        if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("a quoted string");
        char q = s_[i_++];
        size_t end = s_.find(q, i_);
        if (end == std::string_view::npos) fail("a closing quote");
        std::string out(s_.substr(i_, end - i_));
        i_ = end + 1;
        return out;
    }
    bool boolean() {
        skip();
        if (s_.substr(i_, 4) == "True") {
            i_ += 4;
            return true;
        }
        if (s_.substr(i_, 5) == "False") {
            i_ += 5;
            return false;
        }
        fail("True or False");
    }
    Shape tuple() {
        expect('(');
        Shape out;
        while (!peek_is(')')) {
            int64_t v = 0;
            int digits = 0;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
                if (++digits > 15) fail("a dimension below 10^15");
                v = v * 10 + (s_[i_++] - '0');
            }
            if (!digits) fail("a non-negative integer dimension");
            if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long suffix
            out.push_back(v);
            if (!peek_is(')')) expect(',');
        }
        expect(')');
        return out;
    }
    std::string_view s_;
    const std::string& what_;
    size_t i_ = 0;
};

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as zip uses.
uint32_t crc32(const char* p, size_t n) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i)
        c = table[(c ^ static_cast<unsigned char>(p[i])) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

// numpy's unicode arrays ('<U<n>') hold n UCS-4 code units per element, NUL-padded; Kiln's
// string tensors hold UTF-8. Invalid UTF-8 or code points are a kInvalidArgument error.
std::u32string utf8_to_utf32(const std::string& s, const std::string& what) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
        KILN_CHECK(extra >= 0 && i + static_cast<size_t>(extra) < s.size(), kInvalidArgument)
            << what << ": invalid UTF-8 at byte " << i;
        char32_t cp = extra == 0 ? c : c & (0x3f >> extra);
        for (int k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
            KILN_CHECK((cc & 0xc0) == 0x80, kInvalidArgument) << what << ": invalid UTF-8 at byte " << i + k;
            cp = (cp << 6) | (cc & 0x3f);
        }
        out += cp;
        i += static_cast<size_t>(extra) + 1;
    }
    return out;
}

std::string utf32_to_utf8(char32_t cp, const std::string& what) {
    KILN_CHECK(cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff), kInvalidArgument)
        << what << ": invalid code point " << static_cast<uint32_t>(cp);
    std::string o;
    if (cp < 0x80) {
        o += static_cast<char>(cp);
    } else if (cp < 0x800) {
        o += static_cast<char>(0xc0 | (cp >> 6));
        o += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o += static_cast<char>(0xe0 | (cp >> 12));
        o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        o += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        o += static_cast<char>(0xf0 | (cp >> 18));
        o += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        o += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return o;
}

Tensor parse_unicode_array(std::string_view data, const std::string& descr, const Shape& shape, const std::string& what) {
    const std::string digits = descr.substr(2);
    KILN_CHECK(digits.find_first_not_of("0123456789") == std::string::npos && digits.size() <= 6, kUnsupported)
        << what << ": numpy dtype '" << descr << "' is not supported";
    const size_t width = std::stoul(digits);
    uint64_t numel = 1;
    for (int64_t x : shape) {
        KILN_CHECK(width == 0 || x == 0 || numel <= data.size() / (width * 4) / static_cast<uint64_t>(x), kInvalidArgument)
            << what << ": data of shape " << shape_str(shape) << " runs past the end of the file";
        numel *= static_cast<uint64_t>(x);
    }
    KILN_CHECK(numel * width * 4 == data.size(), kInvalidArgument)
        << what << ": expected " << numel * width * 4 << " data bytes for " << descr << " " << shape_str(shape)
        << ", found " << data.size();
    Tensor t(DType::kString, shape);
    for (uint64_t i = 0; i < numel; ++i) {
        std::string& out = t.data_as<std::string>()[i];
        for (size_t c = 0; c < width; ++c) {
            char32_t cp = 0;
            for (int b = 0; b < 4; ++b)
                cp |= static_cast<char32_t>(static_cast<unsigned char>(data[(i * width + c) * 4 + b])) << (8 * b);
            if (cp == 0) break;  // NUL padding
            out += utf32_to_utf8(cp, what);
        }
    }
    return t;
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
    static const char kMagic[] = "\x93NUMPY";
    KILN_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, kMagic, 6) == 0, kInvalidArgument)
        << what << ": not a .npy file (missing \\x93NUMPY magic)";
    int major = static_cast<unsigned char>(bytes[6]);
    KILN_CHECK(major >= 1 && major <= 3, kUnsupported)
        << what << ": .npy format version " << major << "."
        << static_cast<int>(static_cast<unsigned char>(bytes[7]))
        << " is not supported (expected 1.0, 2.0 or 3.0)";
    size_t len_size = major == 1 ? 2 : 4;
    KILN_CHECK(bytes.size() >= 8 + len_size, kInvalidArgument) << what << ": truncated .npy header";
    size_t header_len = le(bytes, 8, static_cast<int>(len_size));
    size_t data_off = 8 + len_size + header_len;
    KILN_CHECK(data_off <= bytes.size(), kInvalidArgument)
        << what << ": .npy header length " << header_len << " runs past the end of the file ("
        << bytes.size() << " bytes)";
    std::string descr;
    bool fortran = false;
    Shape shape;
    HeaderParser(std::string_view(bytes).substr(8 + len_size, header_len), what)
        .parse(descr, fortran, shape);
    KILN_CHECK(!fortran, kUnsupported)
        << what << ": Fortran-order arrays are not supported (save a C-order "
        << "array: np.ascontiguousarray)";
    std::string d = descr;
    if (!d.empty() && d[0] == '=') d[0] = '<';  // native order: little-endian on supported hosts
    KILN_CHECK(d.empty() || d[0] != '>', kUnsupported)
        << what << ": big-endian dtype '" << descr << "' is not supported";
    if (d.size() > 2 && d[0] == '<' && d[1] == 'U')
        return parse_unicode_array(std::string_view(bytes).substr(data_off), d, shape, what);
    auto dtype = dtype_from_numpy_descr(d);
    KILN_CHECK(dtype.has_value(), kUnsupported)
        << what << ": numpy dtype '" << descr << "' is not supported";
    size_t avail = bytes.size() - data_off;
    // Element count with overflow guard: stop as soon as it exceeds what the file can hold.
    uint64_t numel = 1;
    bool zero = false;
    for (int64_t x : shape) zero |= x == 0;
    if (!zero)
        for (int64_t x : shape) {
            // numel * x * size <= avail, checked by division so nothing can overflow.
            KILN_CHECK(static_cast<uint64_t>(x) <= avail / dtype_size(*dtype) / numel,
                       kInvalidArgument)
                << what << ": data of shape " << shape_str(shape)
                << " runs past the end of the file";
            numel *= static_cast<uint64_t>(x);
        }
    else
        numel = 0;
    size_t nbytes = numel * dtype_size(*dtype);
    KILN_CHECK(nbytes == avail, kInvalidArgument)
        << what << ": expected " << nbytes << " data bytes for " << descr << " " << shape_str(shape)
        << ", found " << avail;
    Tensor t(*dtype, shape);
    if (nbytes) std::memcpy(t.data(), bytes.data() + data_off, nbytes);
    return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

void write_npy(const std::string& path, const Tensor& t) {
    std::string descr = t.dtype() == DType::kString ? "" : dtype_numpy_descr(t.dtype());
    std::string data;  // strings: UCS-4 code units, every element padded to the longest
    if (t.dtype() == DType::kString) {
        std::vector<std::u32string> wide;
        size_t width = 1;
        for (int64_t i = 0; i < t.numel(); ++i) {
            wide.push_back(utf8_to_utf32(t.data_as<std::string>()[i], "write_npy('" + path + "')"));
            width = std::max(width, wide.back().size());
        }
        descr = "<U" + std::to_string(width);
        data.assign(wide.size() * width * 4, '\0');
        for (size_t i = 0; i < wide.size(); ++i)
            for (size_t c = 0; c < wide[i].size(); ++c)
                for (int b = 0; b < 4; ++b)
                    data[(i * width + c) * 4 + b] = static_cast<char>((wide[i][c] >> (8 * b)) & 0xff);
    }
    KILN_CHECK(t.dtype() != DType::kBFloat16, kUnsupported)
        << "write_npy('" << path << "'): bf16 has no numpy dtype; convert to f32 first";
    KILN_CHECK(!descr.empty(), kUnsupported)
        << "write_npy('" << path << "'): " << dtype_name(t.dtype()) << " has no numpy dtype; convert to f32 first";
    // The same dict numpy writes: shape "()", "(3,)", "(2, 3)".
    std::string dims;
    for (size_t i = 0; i < t.shape().size(); ++i)
        dims += (i ? ", " : "") + std::to_string(t.shape()[i]);
    if (t.shape().size() == 1) dims += ",";
    std::string header = "{'descr': '" + descr +
                         "', 'fortran_order': False, 'shape': (" + dims + "), }";
    size_t total = 10 + header.size() + 1;  // magic+version+len, dict, '\n'
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    bool v2 = header.size() > 0xffff;
    std::string out = std::string("\x93NUMPY", 6);
    out += static_cast<char>(v2 ? 2 : 1);
    out += '\0';
    size_t n = header.size();
    for (int i = 0; i < (v2 ? 4 : 2); ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += header;
    std::ofstream f(path, std::ios::binary);
    KILN_CHECK(f.good(), kIOError) << "cannot open '" << path << "' for writing";
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (t.dtype() == DType::kString)
        f.write(data.data(), static_cast<std::streamsize>(data.size()));
    else if (t.nbytes())
        f.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
    f.close();
    KILN_CHECK(!f.fail(), kIOError) << "error writing '" << path << "'";
}

std::map<std::string, Tensor> read_npz(const std::string& path) {
    std::string b = read_file(path);
    // End of central directory: 22 bytes + a comment of up to 65535 bytes, at the end.
    size_t eocd = std::string::npos;
    if (b.size() >= 22)
        for (size_t i = b.size() - 22 + 1; i-- > 0 && b.size() - i <= 22 + 65535;)
            if (le(b, i, 4) == 0x06054b50u) {
                eocd = i;
                break;
            }
    KILN_CHECK(eocd != std::string::npos, kInvalidArgument)
        << "'" << path << "' is not a zip (.npz) archive";
    uint64_t count = le(b, eocd + 10, 2), cd_size = le(b, eocd + 12, 4),
             cd_off = le(b, eocd + 16, 4);
    if (cd_off == 0xFFFFFFFFu || count == 0xFFFFu) {  // zip64: locator just before the EOCD
        KILN_CHECK(eocd >= 20 && le(b, eocd - 20, 4) == 0x07064b50u, kInvalidArgument)
            << "'" << path << "': zip64 archive without a zip64 locator";
        uint64_t z = le64(b, eocd - 20 + 8);
        KILN_CHECK(z <= b.size() && b.size() - z >= 56 && le(b, z, 4) == 0x06064b50u, kInvalidArgument)
            << "'" << path << "': bad zip64 end of central directory";
        count = le64(b, z + 32);
        cd_size = le64(b, z + 40);
        cd_off = le64(b, z + 48);
    }
    KILN_CHECK(cd_off <= b.size() && cd_size <= b.size() - cd_off, kInvalidArgument)
        << "'" << path << "': central directory lies outside the file";
    std::map<std::string, Tensor> out;
    size_t p = cd_off;
    for (uint64_t e = 0; e < count; ++e) {
        KILN_CHECK(p + 46 <= b.size() && le(b, p, 4) == 0x02014b50u, kInvalidArgument)
            << "'" << path << "': bad central directory entry " << e;
        uint32_t method = le(b, p + 10, 2), crc = le(b, p + 16, 4);
        uint64_t csize = le(b, p + 20, 4), usize = le(b, p + 24, 4);
        size_t name_len = le(b, p + 28, 2), extra_len = le(b, p + 30, 2),
               comment_len = le(b, p + 32, 2);
        uint64_t local = le(b, p + 42, 4);
        KILN_CHECK(p + 46 + name_len + extra_len + comment_len <= b.size(), kInvalidArgument)
            << "'" << path << "': central directory entry " << e
            << " runs past the end of the file";
        std::string name = b.substr(p + 46, name_len);
        // zip64 extended information: 8-byte values for the fields saturated at 0xFFFFFFFF, in
        // order.
        for (size_t x = p + 46 + name_len, xe = x + extra_len; x + 4 <= xe;) {
            uint32_t id = le(b, x, 2), sz = le(b, x + 2, 2);
            size_t q = x + 4, qe = std::min<size_t>(q + sz, xe);
            if (id == 0x0001) {
                for (uint64_t* f : {&usize, &csize, &local})
                    if (*f == 0xFFFFFFFFu && q + 8 <= qe) {
                        *f = le64(b, q);
                        q += 8;
                    }
            }
            x += 4 + sz;
        }
        p += 46 + name_len + extra_len + comment_len;
        std::string what = "'" + path + "' entry '" + name + "'";
        KILN_CHECK(method != 8, kUnsupported)
            << what << " is deflate-compressed; write the archive with "
            << "np.savez, not np.savez_compressed";
        KILN_CHECK(method == 0, kUnsupported) << what << " uses zip compression method " << method
                                              << " (only stored entries are supported)";
        KILN_CHECK(csize == usize, kInvalidArgument)
            << what << ": stored entry with different sizes";
        KILN_CHECK(local <= b.size() && b.size() - local >= 30 && le(b, local, 4) == 0x04034b50u,
                   kInvalidArgument)
            << what << ": bad local header offset " << local;
        uint64_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
        KILN_CHECK(data <= b.size() && csize <= b.size() - data, kInvalidArgument)
            << what << ": data runs past the end of the file";
        std::string bytes = b.substr(data, csize);
        KILN_CHECK(crc32(bytes.data(), bytes.size()) == crc, kInvalidArgument)
            << what << ": CRC mismatch (corrupt archive)";
        std::string key = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0
                              ? name.substr(0, name.size() - 4)
                              : name;
        out[key] = parse_npy(bytes, what);
    }
    return out;
}

}  // namespace kiln
