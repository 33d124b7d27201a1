// .npy / .npz reading and writing. The byte strings below were produced by numpy 2.x
// (np.save, np.lib.format.write_array(version=(2, 0)), np.savez) from the arrays named in each
// comment, so they check Kiln against numpy's own encoder.
#include "support/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "support/error.h"

namespace kiln {
namespace {

// np.save(np.array(['ab', '\u00e9t\u00e9x'])): a '<U4' unicode array, UCS-4 and NUL-padded.
// 160 bytes.
const std::string kUnicodeNpy(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x55"
    "\x34\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61"
    "\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x0a\x61\x00\x00\x00\x62\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\xe9\x00\x00\x00\x74\x00\x00\x00\xe9\x00\x00\x00\x78\x00\x00\x00",
    160);

// np.save(np.array([[1, -2, 3], [400, 5, -32768]], dtype='<i2'))
// 140 bytes.
const std::string kI16Npy(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x69"
    "\x32"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c"
    "\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x01\x00\xfe\xff\x03\x00\x90\x01\x05\x00\x00\x80",
    140);
// np.lib.format.write_array(np.array([0.5, -1.25], dtype='<f4'), version=(2, 0))
// 136 bytes.
const std::string kF32V2Npy(
    "\x93\x4e\x55\x4d\x50\x59\x02\x00\x74\x00\x00\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27"
    "\x3c"
    "\x66\x34\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46"
    "\x61"
    "\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x3f\x00\x00\xa0\xbf",
    136);
// np.save(np.array(2.5, dtype='<f8'))  (0-d)
// 136 bytes.
const std::string kScalarNpy(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66"
    "\x38"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c"
    "\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x29\x2c\x20\x7d\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x00\x00\x00\x04\x40",
    136);
// np.savez(w=np.array([1.5, -2.0, 3.25], dtype=np.float32), idx=np.array([[7], [8]],
// dtype=np.int64)) 522 bytes.
const std::string kNpz(
    "\x50\x4b\x03\x04\x2d\x00\x00\x00\x00\x00\x00\x00\x21\x00\x14\x03\xde\xb4\xff\xff\xff\xff\xff"
    "\xff"
    "\xff\xff\x05\x00\x14\x00\x77\x2e\x6e\x70\x79\x01\x00\x10\x00\x8c\x00\x00\x00\x00\x00\x00\x00"
    "\x8c"
    "\x00\x00\x00\x00\x00\x00\x00\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63"
    "\x72"
    "\x27\x3a\x20\x27\x3c\x66\x34\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65"
    "\x72"
    "\x27\x3a\x20\x46\x61\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x33\x2c\x29"
    "\x2c"
    "\x20\x7d\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\xc0\x3f\x00\x00\x00\xc0"
    "\x00"
    "\x00\x50\x40\x50\x4b\x03\x04\x2d\x00\x00\x00\x00\x00\x00\x00\x21\x00\xd8\x1c\xd1\x3a\xff\xff"
    "\xff"
    "\xff\xff\xff\xff\xff\x07\x00\x14\x00\x69\x64\x78\x2e\x6e\x70\x79\x01\x00\x10\x00\x90\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x90\x00\x00\x00\x00\x00\x00\x00\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b"
    "\x27"
    "\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x69\x38\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e"
    "\x5f"
    "\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a"
    "\x20"
    "\x28\x32\x2c\x20\x31\x29\x2c\x20\x7d\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x0a\x07\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x50\x4b\x01\x02\x2d\x03\x2d\x00\x00\x00\x00"
    "\x00"
    "\x00\x00\x21\x00\x14\x03\xde\xb4\x8c\x00\x00\x00\x8c\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x80\x01\x00\x00\x00\x00\x77\x2e\x6e\x70\x79\x50\x4b\x01\x02\x2d\x03\x2d\x00"
    "\x00"
    "\x00\x00\x00\x00\x00\x21\x00\xd8\x1c\xd1\x3a\x90\x00\x00\x00\x90\x00\x00\x00\x07\x00\x00\x00"
    "\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x80\x01\xc3\x00\x00\x00\x69\x64\x78\x2e\x6e\x70\x79\x50\x4b\x05"
    "\x06"
    "\x00\x00\x00\x00\x02\x00\x02\x00\x68\x00\x00\x00\x8c\x01\x00\x00\x00\x00",
    522);

std::string temp_path(const std::string& name) {
    return std::string(KILN_BINARY_DIR) + "/npy_test_" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& substr) {
    try {
        fn();
        FAIL() << "expected an error containing '" << substr << "'";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(e.message().find(substr), std::string::npos) << e.message();
    }
}

TEST(Npy, ParsesNumpyBytes) {
    Tensor t = parse_npy(kI16Npy, "i16");
    EXPECT_EQ(t.dtype(), DType::kInt16);
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    const int16_t want[] = {1, -2, 3, 400, 5, -32768};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data_as<int16_t>()[i], want[i]) << i;

    Tensor v2 = parse_npy(kF32V2Npy, "v2");
    EXPECT_EQ(v2.dtype(), DType::kFloat32);
    EXPECT_EQ(v2.shape(), (Shape{2}));
    EXPECT_EQ(v2.data_as<float>()[0], 0.5f);
    EXPECT_EQ(v2.data_as<float>()[1], -1.25f);

    Tensor s = parse_npy(kScalarNpy, "scalar");
    EXPECT_EQ(s.dtype(), DType::kFloat64);
    EXPECT_TRUE(s.shape().empty());
    EXPECT_EQ(s.data_as<double>()[0], 2.5);
}

TEST(Npy, WriteMatchesNumpyBytes) {
    Tensor t(DType::kInt16, {2, 3});
    const int16_t v[] = {1, -2, 3, 400, 5, -32768};
    std::memcpy(t.data(), v, sizeof(v));
    std::string path = temp_path("i16.npy");
    write_npy(path, t);
    EXPECT_EQ(read_bytes(path), kI16Npy);
    Tensor s(DType::kFloat64, {});
    s.data_as<double>()[0] = 2.5;
    write_npy(path, s);
    EXPECT_EQ(read_bytes(path), kScalarNpy);
    std::remove(path.c_str());
}

TEST(Npy, RoundTripSeveralDtypes) {
    std::string path = temp_path("rt.npy");
    const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,
                            DType::kInt32,   DType::kInt64,   DType::kUInt8,   DType::kUInt16,
                            DType::kUInt64,  DType::kBool};
    std::mt19937 rng(7);
    for (DType dt : dtypes) {
        for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0, 3}}) {
            Tensor t(dt, shape);
            auto* bytes = static_cast<uint8_t*>(t.data());
            for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
            if (dt == DType::kBool)
                for (int64_t i = 0; i < t.numel(); ++i) bytes[i] &= 1;
            write_npy(path, t);
            Tensor r = read_npy(path);
            EXPECT_EQ(r.dtype(), dt) << dtype_name(dt);
            EXPECT_EQ(r.shape(), shape) << dtype_name(dt);
            ASSERT_EQ(r.nbytes(), t.nbytes());
            EXPECT_EQ(std::memcmp(r.data(), t.data(), t.nbytes()), 0)
                << dtype_name(dt) << shape_str(shape);
        }
    }
    std::remove(path.c_str());
}

TEST(Npy, UnicodeArraysAreStringTensors) {
    Tensor t = parse_npy(kUnicodeNpy, "unicode");
    ASSERT_EQ(t.dtype(), DType::kString);
    ASSERT_EQ(t.shape(), Shape({2}));
    EXPECT_EQ(t.data_as<std::string>()[0], "ab");
    EXPECT_EQ(t.data_as<std::string>()[1], "\xc3\xa9t\xc3\xa9x");  // UTF-8
    // Written back, the bytes are numpy's.
    std::string path = ::testing::TempDir() + "kiln_unicode.npy";
    write_npy(path, t);
    std::ifstream f(path, std::ios::binary);
    std::string back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(back, kUnicodeNpy);
    std::remove(path.c_str());
    // A truncated payload and invalid UTF-8 are errors.
    EXPECT_THROW(parse_npy(kUnicodeNpy.substr(0, kUnicodeNpy.size() - 4), "cut"), Error);
    Tensor bad(DType::kString, {1});
    bad.data_as<std::string>()[0] = "\xff";
    EXPECT_THROW(write_npy(path, bad), Error);
}

TEST(Npy, Bf16WriteRefused) {
    expect_error([] { write_npy(temp_path("bf.npy"), Tensor(DType::kBFloat16, {2})); },
                 ErrorKind::kUnsupported, "bf16");
}

TEST(Npy, MissingFile) {
    expect_error([] { read_npy("/nonexistent/dir/x.npy"); }, ErrorKind::kIOError,
                 "/nonexistent/dir/x.npy");
    expect_error([] { read_npz("/nonexistent/dir/x.npz"); }, ErrorKind::kIOError,
                 "/nonexistent/dir/x.npz");
}

TEST(Npy, EveryTruncationThrows) {
    for (size_t n = 0; n < kI16Npy.size(); ++n)
        EXPECT_THROW(parse_npy(kI16Npy.substr(0, n), "trunc"), Error) << n;
    EXPECT_THROW(parse_npy(kI16Npy + "x", "extra"), Error);
}

TEST(Npy, GarbageNeverCrashes) {
    std::mt19937 rng(99);
    int errors = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string s = iter % 2 ? kI16Npy : kF32V2Npy;
        for (int k = 0; k < 1 + iter % 5; ++k) s[rng() % s.size()] = static_cast<char>(rng());
        try {
            parse_npy(s, "fuzz");
        } catch (const Error&) {
            ++errors;
        }
    }
    EXPECT_GT(errors, 0);
    EXPECT_THROW(parse_npy(std::string(200, '\0'), "zeros"), Error);
}

TEST(Npy, HeaderProblems) {
    auto with_header = [](const std::string& dict, size_t data_bytes) {
        std::string h = dict;
        while ((10 + h.size() + 1) % 64) h += ' ';
        h += '\n';
        std::string out = std::string("\x93NUMPY\x01\x00", 8);
        out += static_cast<char>(h.size() & 0xff);
        out += static_cast<char>(h.size() >> 8);
        return out + h + std::string(data_bytes, '\0');
    };
    expect_error(
        [&] {
            parse_npy(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
                      "f");
        },
        ErrorKind::kUnsupported, "Fortran");
    expect_error(
        [&] {
            parse_npy(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4),
                      "be");
        },
        ErrorKind::kUnsupported, "big-endian");
    expect_error(
        [&] {
            parse_npy(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8),
                      "c");
        },
        ErrorKind::kUnsupported, "<c8");
    // A huge shape must fail on size, not try to allocate.
    expect_error(
        [&] {
            parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                  "(100000000000, 100000000000), }",
                                  4),
                      "huge");
        },
        ErrorKind::kInvalidArgument, "huge");
    expect_error(
        [&] { parse_npy(with_header("{'descr': '<f4', 'shape': (1,), }", 4), "nofortran"); },
        ErrorKind::kInvalidArgument, "fortran_order");
    // Dimensions whose product overflows 64 bits, with a first dimension the data could hold.
    expect_error(
        [&] {
            parse_npy(with_header("{'descr': '<f4', 'fortran_order': False, "
                                  "'shape': (100000, 900000000000000, 900000000000000), }",
                                  400000),
                      "overflow");
        },
        ErrorKind::kInvalidArgument, "overflow");
    // The native-order '=' prefix is little-endian here.
    Tensor t = parse_npy(
        with_header("{'descr': '=i4', 'fortran_order': False, 'shape': (1,), }", 4), "native");
    EXPECT_EQ(t.dtype(), DType::kInt32);
}

TEST(Npz, ReadsNumpySavez) {
    std::string path = temp_path("a.npz");
    write_bytes(path, kNpz);
    std::map<std::string, Tensor> m = read_npz(path);
    ASSERT_EQ(m.size(), 2u);
    ASSERT_TRUE(m.count("w"));
    ASSERT_TRUE(m.count("idx"));
    const Tensor& w = m.at("w");
    EXPECT_EQ(w.dtype(), DType::kFloat32);
    EXPECT_EQ(w.shape(), (Shape{3}));
    EXPECT_EQ(w.data_as<float>()[0], 1.5f);
    EXPECT_EQ(w.data_as<float>()[1], -2.0f);
    EXPECT_EQ(w.data_as<float>()[2], 3.25f);
    const Tensor& idx = m.at("idx");
    EXPECT_EQ(idx.dtype(), DType::kInt64);
    EXPECT_EQ(idx.shape(), (Shape{2, 1}));
    EXPECT_EQ(idx.data_as<int64_t>()[0], 7);
    EXPECT_EQ(idx.data_as<int64_t>()[1], 8);
    std::remove(path.c_str());
}

TEST(Npz, DeflatedEntryRefused) {
    std::string b = kNpz;
    size_t cd = b.find(std::string("PK\x01\x02", 4));
    ASSERT_NE(cd, std::string::npos);
    b[cd + 10] = 8;  // compression method: deflate
    std::string path = temp_path("deflate.npz");
    write_bytes(path, b);
    expect_error([&] { read_npz(path); }, ErrorKind::kUnsupported, "savez_compressed");
    std::remove(path.c_str());
}

TEST(Npz, CorruptDataFailsCrc) {
    std::string b = kNpz;
    b[185] ^= 0x40;  // inside w's float data (local header 55 bytes + npy header 128)
    std::string path = temp_path("crc.npz");
    write_bytes(path, b);
    expect_error([&] { read_npz(path); }, ErrorKind::kInvalidArgument, "CRC");
    std::remove(path.c_str());
}

TEST(Npz, TruncatedAndGarbageThrow) {
    std::string path = temp_path("bad.npz");
    for (size_t n : {size_t{0}, size_t{10}, size_t{100}, kNpz.size() / 2, kNpz.size() - 1}) {
        write_bytes(path, kNpz.substr(0, n));
        EXPECT_THROW(read_npz(path), Error) << n;
    }
    std::mt19937 rng(3);
    for (int iter = 0; iter < 500; ++iter) {
        std::string b = kNpz;
        for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
        write_bytes(path, b);
        try {
            read_npz(path);
        } catch (const Error&) {
        }
    }
    std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln
