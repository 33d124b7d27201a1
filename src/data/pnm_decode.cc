// Netpbm decoding: PGM (P2 text, P5 binary) and PPM (P3 text, P6 binary). The header is the
// magic, width, height and maxval separated by whitespace, with '#' comments to the end of a
// line; binary samples are one byte (maxval < 256) or two big-endian bytes.
#include <cctype>
#include <cstdint>

#include "data/image_decode.h"
#include "support/error.h"

namespace kiln::data {
namespace {

class PnmReader {
public:
    PnmReader(const std::string& b, const std::string& what) : b_(b), what_(what) {}

    // The next whitespace-separated unsigned integer (skipping comments).
    uint64_t number(const char* name) {
        skip_space();
        size_t start = pos_;
        uint64_t v = 0;
        while (pos_ < b_.size() && std::isdigit(static_cast<unsigned char>(b_[pos_]))) {
            KILN_CHECK(v < (uint64_t{1} << 40), kInvalidArgument) << what_ << ": " << name << " is too large";
            v = v * 10 + (b_[pos_++] - '0');
        }
        KILN_CHECK(pos_ > start, kInvalidArgument)
            << what_ << ": bad Netpbm " << name << " at byte " << start << " (expected a number)";
        return v;
    }
    // After maxval: exactly one whitespace byte, then the binary raster.
    size_t raster_start() {
        KILN_CHECK(pos_ < b_.size() && std::isspace(static_cast<unsigned char>(b_[pos_])), kInvalidArgument)
            << what_ << ": expected one whitespace byte after the Netpbm header";
        return pos_ + 1;
    }

private:
    void skip_space() {
        while (pos_ < b_.size()) {
            if (b_[pos_] == '#')
                while (pos_ < b_.size() && b_[pos_] != '\n') ++pos_;
            else if (std::isspace(static_cast<unsigned char>(b_[pos_])))
                ++pos_;
            else
                break;
        }
    }
    const std::string& b_;
    const std::string& what_;
    size_t pos_ = 2;  // after the magic
};

}  // namespace

Tensor decode_pnm(const std::string& bytes, const std::string& what) {
    KILN_CHECK(bytes.size() >= 2 && bytes[0] == 'P', kInvalidArgument) << what << ": not a Netpbm file";
    char kind = bytes[1];
    KILN_CHECK(kind == '2' || kind == '3' || kind == '5' || kind == '6', kUnsupported)
        << what << ": Netpbm type P" << kind << " is not supported (P2/P5 PGM, P3/P6 PPM are)";
    bool text = kind == '2' || kind == '3';
    int64_t c = (kind == '3' || kind == '6') ? 3 : 1;
    PnmReader r(bytes, what);
    uint64_t w = r.number("width"), h = r.number("height"), maxval = r.number("maxval");
    KILN_CHECK(w > 0 && h > 0, kInvalidArgument) << what << ": empty image (" << w << "x" << h << ")";
    KILN_CHECK(maxval >= 1 && maxval <= 65535, kInvalidArgument)
        << what << ": maxval " << maxval << " is outside [1, 65535]";
    // Every sample takes at least one byte of the file (checked by division: no overflow).
    KILN_CHECK(w <= bytes.size() / h / c, kInvalidArgument)
        << what << ": " << w << "x" << h << " image does not fit in a " << bytes.size() << "-byte file";
    uint64_t n = w * h * static_cast<uint64_t>(c);
    Tensor out(DType::kFloat32, {c, static_cast<int64_t>(h), static_cast<int64_t>(w)});
    float* o = out.data_as<float>();
    size_t bps = maxval < 256 ? 1 : 2;
    size_t p = text ? 0 : r.raster_start();
    if (!text) {
        KILN_CHECK(bytes.size() - p >= n * bps, kInvalidArgument)
            << what << ": truncated raster: expected " << n * bps << " bytes, found " << bytes.size() - p;
    }
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t v;
        if (text) {
            v = r.number("sample");
        } else if (bps == 1) {
            v = static_cast<unsigned char>(bytes[p + i]);
        } else {
            v = (static_cast<unsigned char>(bytes[p + 2 * i]) << 8) | static_cast<unsigned char>(bytes[p + 2 * i + 1]);
        }
        KILN_CHECK(v <= maxval, kInvalidArgument)
            << what << ": sample " << i << " is " << v << ", above maxval " << maxval;
        // Interleaved (y, x, channel) in the file; planar [C,H,W] out.
        uint64_t k = i % c, pix = i / c;
        o[k * w * h + pix] = static_cast<float>(static_cast<double>(v) / maxval);
    }
    return out;
}

Tensor decode_image(const std::string& bytes, const std::string& what) {
    if (bytes.size() >= 8 && static_cast<unsigned char>(bytes[0]) == 0x89 && bytes.compare(1, 3, "PNG") == 0)
        return decode_png(bytes, what);
    if (bytes.size() >= 2 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '7') return decode_pnm(bytes, what);
    KILN_THROW(kInvalidArgument) << what << ": unrecognized image format (expected PNG, PGM or PPM)";
}

}  // namespace kiln::data
