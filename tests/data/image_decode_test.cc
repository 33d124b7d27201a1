// PNG (libpng) and PGM/PPM decoding against files written by a small Python encoder (zlib +
// struct, rows filtered with None/Sub/Up) and the expected [C,H,W] arrays numpy computed from
// the same samples (sample / maxval), saved as .npy.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "data/image_decode.h"
#include "data/pipeline.h"
#include "support/error.h"
#include "support/npy.h"
#include "test_util.h"

namespace kiln::data {
namespace {

using testing::ScratchDir;

const char* kImages = R"(
import struct, zlib
import numpy as np

def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)

def pack_row(samples, depth):
    if depth == 16:
        return samples.astype('>u2').tobytes()
    if depth == 8:
        return samples.astype(np.uint8).tobytes()
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per):
        b = 0
        for k in range(per):
            v = int(samples[i + k]) if i + k < len(samples) else 0
            b |= v << (8 - depth * (k + 1))
        out.append(b)
    return bytes(out)

def write_png(path, samples, depth, color, palette=None):
    # samples: [H, W, C] integers (C = 1 for gray and palette indices)
    h, w, c = samples.shape
    bpp = max(1, c * depth // 8)
    raw, prev = b'', bytes(len(pack_row(samples[0].reshape(-1), depth)))
    for y in range(h):
        row = pack_row(samples[y].reshape(-1), depth)
        kind = y % 3  # 0 None, 1 Sub, 2 Up
        if kind == 1:
            row_f = bytes((row[i] - (row[i - bpp] if i >= bpp else 0)) & 255 for i in range(len(row)))
        elif kind == 2:
            row_f = bytes((row[i] - prev[i]) & 255 for i in range(len(row)))
        else:
            row_f = row
        raw += bytes([kind]) + row_f
        prev = row
    png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, color, 0, 0, 0))
    if palette is not None:
        png += chunk(b'PLTE', palette.astype(np.uint8).tobytes())
    png += chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
    open(path, 'wb').write(png)

def expect(name, chw):
    np.save(name + '.expected.npy', chw.astype(np.float32))

H, W = 5, 7
yy, xx = np.mgrid[0:H, 0:W]
def plane(k, mod):
    return (yy * 37 + xx * 11 + k * 101) % mod

g8 = plane(0, 256)[..., None]
write_png('gray8.png', g8, 8, 0); expect('gray8.png', g8.transpose(2, 0, 1) / 255.0)
g16 = (plane(0, 65536) * 613 % 65536)[..., None]
write_png('gray16.png', g16, 16, 0); expect('gray16.png', g16.transpose(2, 0, 1) / 65535.0)
rgb = np.stack([plane(k, 256) for k in range(3)], -1)
write_png('rgb8.png', rgb, 8, 2); expect('rgb8.png', rgb.transpose(2, 0, 1) / 255.0)
rgba16 = np.stack([plane(k, 65536) * 257 % 65536 for k in range(4)], -1)
write_png('rgba16.png', rgba16, 16, 6); expect('rgba16.png', rgba16.transpose(2, 0, 1) / 65535.0)
ga = np.stack([plane(0, 256), plane(5, 256)], -1)
write_png('gray_alpha.png', ga, 8, 4); expect('gray_alpha.png', ga.transpose(2, 0, 1) / 255.0)
bits = plane(0, 2)[..., None]
write_png('gray1.png', bits, 1, 0); expect('gray1.png', bits.transpose(2, 0, 1) / 1.0)
pal = np.array([[255, 0, 0], [0, 128, 0], [10, 20, 30], [200, 201, 202]])
idx = plane(0, 4)[..., None]
write_png('palette2.png', idx, 2, 3, pal); expect('palette2.png', pal[idx[..., 0]].transpose(2, 0, 1) / 255.0)

def pnm(path, magic, samples, maxval, comment=True):
    h, w, c = samples.shape
    head = magic + (b'\n# written by the test\n' if comment else b'\n') + b'%d %d\n%d\n' % (w, h, maxval)
    if magic in (b'P2', b'P3'):
        body = '\n'.join(' '.join(str(int(v)) for v in samples[y].reshape(-1)) for y in range(h)).encode() + b'\n'
    else:
        body = samples.astype('>u2' if maxval > 255 else np.uint8).tobytes()
    open(path, 'wb').write(head + body)
    expect(path, samples.transpose(2, 0, 1) / float(maxval))

pnm('p5.pgm', b'P5', plane(0, 200)[..., None], 199)
pnm('p5_16.pgm', b'P5', plane(0, 1000)[..., None], 999)
pnm('p2.pgm', b'P2', plane(0, 16)[..., None], 15)
pnm('p6.ppm', b'P6', rgb, 255, comment=False)
pnm('p3.ppm', b'P3', np.stack([plane(k, 100) for k in range(3)], -1), 99)

good = open('rgb8.png', 'rb').read()
open('truncated.png', 'wb').write(good[:len(good) // 2])
bad = bytearray(good); bad[50] ^= 0xff  # inside the IDAT data: a CRC error
open('badcrc.png', 'wb').write(bytes(bad))
open('short.pgm', 'wb').write(b'P5 4 4 255\n' + bytes(10))
)";

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(ImageDecode, PngAndNetpbmMatchNumpy) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kImages));
    for (const char* name : {"gray8.png", "gray16.png", "rgb8.png", "rgba16.png", "gray_alpha.png", "gray1.png",
                             "palette2.png", "p5.pgm", "p5_16.pgm", "p2.pgm", "p6.ppm", "p3.ppm"}) {
        SCOPED_TRACE(name);
        Tensor got = decode_image(slurp(dir / name), name);
        Tensor want = read_npy(dir / (std::string(name) + ".expected.npy"));
        ASSERT_EQ(got.dtype(), DType::kFloat32);
        ASSERT_EQ(got.shape(), want.shape());
        ASSERT_EQ(got.shape()[1], 5);
        ASSERT_EQ(got.shape()[2], 7);
        for (int64_t i = 0; i < got.numel(); ++i)
            ASSERT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], 1e-6) << "element " << i;
    }
}

TEST(ImageDecode, BadFilesAreErrorsNamingTheFile) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kImages));
    for (const char* name : {"truncated.png", "badcrc.png", "short.pgm"}) {
        SCOPED_TRACE(name);
        try {
            decode_image(slurp(dir / name), dir / name);
            FAIL() << "expected an error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(dir / name), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(decode_image("GIF89a....", "x.gif"), Error);
    EXPECT_THROW(decode_image("P4\n2 2\n\x00\x00", "x.pbm"), Error);
}

TEST(ImageDirSource, LabelsFileNamesImagesDecodedOnGet) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kImages));
    testing::write_file(dir / "labels.txt",
                        "file,label\n"
                        "gray8.png,3\n"
                        "# a comment\n"
                        "\n"
                        "p5.pgm, 1\n");
    auto src = open_source(dir.str());
    ASSERT_EQ(src->size(), 2);
    Example ex = src->get(1);
    EXPECT_EQ(ex.at("labels").dtype(), DType::kInt64);
    EXPECT_EQ(ex.at("labels").data_as<int64_t>()[0], 1);
    Tensor want = read_npy(dir / "p5.pgm.expected.npy");
    ASSERT_EQ(ex.at("image").shape(), want.shape());
    EXPECT_NEAR(ex.at("image").data_as<float>()[9], want.data_as<float>()[9], 1e-6);
    EXPECT_NE(src->describe().find("2 records: image f32[1,5,7]"), std::string::npos) << src->describe();

    // A bad image is an error naming the file, raised by get() (the pipeline's worker).
    testing::write_file(dir / "labels.txt", "gray8.png,0\nbadcrc.png,1\n");
    auto bad = open_source(dir.str());
    try {
        bad->get(1);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("badcrc.png"), std::string::npos) << e.what();
    }
    // Through a pipeline: raised from next() on the consumer's thread, naming the file.
    Pipeline p(bad, {.batch_size = 2, .map_threads = 2});
    p.start_epoch(0);
    try {
        p.next();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("record 1 (epoch 0, batch 0)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("badcrc.png"), std::string::npos) << e.what();
    }
    testing::write_file(dir / "labels.txt", "gray8.png,0\nnothere.png,1\n");
    try {
        open_source(dir.str());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("labels.txt:2"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("nothere.png"), std::string::npos) << e.what();
    }
    testing::write_file(dir / "labels.txt", "gray8.png,0\np5.pgm,cat\n");
    EXPECT_THROW(open_source(dir.str()), Error);
}

}  // namespace
}  // namespace kiln::data
