// PNG decoding through libpng's progressive-free "low-level" reader.
//
// NOTE: libpng reports errors by longjmp to a setjmp point. A longjmp must not skip C++
// destructors, and locals changed after setjmp are indeterminate afterwards; so the function
// holding the setjmp (read_png) keeps every piece of state in a caller-owned PngState reached
// through a pointer that never changes, creates no C++ objects itself, and only reports
// success or failure. The C++ side (decode_png) turns a failure into a kiln::Error.
//
// libpng's simplified API (png_image) was not used: it gamma-converts 16-bit images to linear
// light, while the data pipeline wants the stored samples scaled to [0,1].
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <vector>

#include "data/image_decode.h"
#include "support/error.h"

namespace kiln::data {
namespace {

struct PngState {
    const unsigned char* data = nullptr;
    size_t size = 0, pos = 0;
    char error[256] = {};
    uint32_t width = 0, height = 0;
    int channels = 0, bit_depth = 0;
    std::vector<unsigned char> pixels;  // rows, big-endian 16-bit samples when bit_depth is 16
    std::vector<png_bytep> rows;
};

void on_error(png_structp png, png_const_charp msg) {
    auto* st = static_cast<PngState*>(png_get_error_ptr(png));
    std::snprintf(st->error, sizeof st->error, "%s", msg);
    png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, png_size_t n) {
    auto* st = static_cast<PngState*>(png_get_io_ptr(png));
    if (n > st->size - st->pos) png_error(png, "truncated file (read past the end)");
    std::memcpy(out, st->data + st->pos, n);
    st->pos += n;
}

// Allocates the pixel rows once the header is known: a frame of its own, so read_png creates
// no C++ objects; no exception leaves it (an allocation failure is reported as false).
bool prepare_rows(PngState* st, size_t rowbytes) noexcept {
    constexpr uint64_t kMaxBytes = uint64_t{1} << 31;  // 2 GiB: a bogus header, not an image
    if (st->height == 0 || rowbytes == 0 || rowbytes * uint64_t{st->height} > kMaxBytes) return false;
    try {
        st->pixels.assign(rowbytes * st->height, 0);
        st->rows.resize(st->height);
    } catch (...) {
        return false;
    }
    for (uint32_t y = 0; y < st->height; ++y) st->rows[y] = st->pixels.data() + y * rowbytes;
    return true;
}

bool read_png(PngState* st) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, on_error, on_warning);
    if (!png) return false;
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, nullptr, nullptr);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, nullptr);
        return false;
    }
    png_set_read_fn(png, st, on_read);
    png_read_info(png, info);
    int color = png_get_color_type(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    st->width = png_get_image_width(png, info);
    st->height = png_get_image_height(png, info);
    st->channels = png_get_channels(png, info);
    st->bit_depth = png_get_bit_depth(png, info);
    if (!prepare_rows(st, png_get_rowbytes(png, info))) png_error(png, "image too large or empty");
    png_read_image(png, st->rows.data());
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
}

}  // namespace

Tensor decode_png(const std::string& bytes, const std::string& what) {
    PngState st;
    st.data = reinterpret_cast<const unsigned char*>(bytes.data());
    st.size = bytes.size();
    KILN_CHECK(bytes.size() >= 8 && png_sig_cmp(st.data, 0, 8) == 0, kInvalidArgument)
        << what << ": not a PNG file (bad signature)";
    KILN_CHECK(read_png(&st), kInvalidArgument) << what << ": bad PNG: " << (st.error[0] ? st.error : "libpng failed");
    KILN_CHECK(st.bit_depth == 8 || st.bit_depth == 16, kInternal)
        << "bug in Kiln: PNG bit depth " << st.bit_depth << " after expansion";
    int64_t c = st.channels, h = st.height, w = st.width;
    Tensor out(DType::kFloat32, {c, h, w});
    float* o = out.data_as<float>();
    const unsigned char* px = st.pixels.data();
    size_t rowbytes = st.rows.size() > 1 ? static_cast<size_t>(st.rows[1] - st.rows[0]) : st.pixels.size();
    for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
            for (int64_t k = 0; k < c; ++k) {
                size_t i = y * rowbytes;
                float v = st.bit_depth == 8
                              ? px[i + x * c + k] / 255.0f
                              : ((px[i + 2 * (x * c + k)] << 8) | px[i + 2 * (x * c + k) + 1]) / 65535.0f;
                o[(k * h + y) * w + x] = v;
            }
    return out;
}

}  // namespace kiln::data
