// Sources read back what numpy and hand-written CSV files hold. Expected values are computed
// here from the same formulas the Python scripts used, not taken from Kiln.
#include <gtest/gtest.h>

#include "data/pipeline.h"
#include "support/error.h"
#include "test_util.h"

namespace kiln::data {
namespace {

using testing::ScratchDir;

// x[i, a, b] = 0.5 * (i*6 + a*3 + b) - 3 (f32), y[i] = i % 3 (i64), w[i] = 7 - i (i32).
const char* kArrays = R"(
import numpy as np
n = 11
x = (np.arange(n * 6).reshape(n, 2, 3) * 0.5 - 3).astype(np.float32)
y = (np.arange(n) % 3).astype(np.int64)
w = (7 - np.arange(n)).astype(np.int32)
np.savez('stored.npz', x=x, y=y, w=w)
np.savez_compressed('deflated.npz', x=x, y=y, w=w)
np.save('x.npy', x)
np.savez('mismatch.npz', x=x, y=y[:5])
big = np.tile(np.arange(1000, dtype=np.float64), (50, 1))  # compresses well: a real deflate stream
np.savez_compressed('big.npz', big=big)
)";

void expect_arrays(const Source& src) {
    ASSERT_EQ(src.size(), 11);
    for (int64_t i : {0, 4, 10}) {
        Example ex = src.get(i);
        ASSERT_EQ(ex.size(), 3u);
        const Tensor& x = ex.at("image");
        ASSERT_EQ(x.dtype(), DType::kFloat32);
        ASSERT_EQ(x.shape(), (Shape{2, 3}));
        for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(x.data_as<float>()[k], 0.5f * (i * 6 + k) - 3) << i << "," << k;
        const Tensor& y = ex.at("labels");
        ASSERT_EQ(y.dtype(), DType::kInt64);
        EXPECT_TRUE(y.shape().empty());
        EXPECT_EQ(y.data_as<int64_t>()[0], i % 3);
        EXPECT_EQ(ex.at("w").dtype(), DType::kInt32);
        EXPECT_EQ(ex.at("w").data_as<int32_t>()[0], 7 - i);
    }
}

TEST(NpzSource, StoredAndDeflatedArchivesReadBackNumpysArrays) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kArrays));
    SourceOptions opts;
    opts.rename = {{"x", "image"}, {"y", "labels"}};
    for (const char* name : {"stored.npz", "deflated.npz"}) {
        SCOPED_TRACE(name);
        auto src = open_source(dir / name, opts);
        expect_arrays(*src);
        EXPECT_EQ(src->describe(), dir / name + " (11 records: image f32[2,3], labels i64[], w i32[])");
    }
    auto big = open_source(dir / "big.npz");
    ASSERT_EQ(big->size(), 50);
    Example row = big->get(49);
    ASSERT_EQ(row.at("big").shape(), Shape{1000});
    for (int64_t k = 0; k < 1000; k += 97) EXPECT_EQ(row.at("big").data_as<double>()[k], k);
}

TEST(NpzSource, DisagreeingRecordCountsAndCorruptArchivesAreErrors) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kArrays));
    try {
        open_source(dir / "mismatch.npz");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("disagree on the number of records"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("mismatch.npz"), std::string::npos) << e.what();
    }
    // Flip bytes in the middle of the deflate stream: a zlib error or a CRC mismatch, named.
    std::string bytes;
    {
        std::ifstream f(dir / "deflated.npz", std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    for (size_t i = 100; i < 140; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
    testing::write_file(dir / "corrupt.npz", bytes);
    try {
        open_source(dir / "corrupt.npz");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("corrupt.npz"), std::string::npos) << e.what();
    }
    testing::write_file(dir / "notzip.npz", "hello");
    EXPECT_THROW(open_source(dir / "notzip.npz"), Error);
}

TEST(NpySource, OneFieldNamedInputOrRenamed) {
    KILN_REQUIRE_NUMPY();
    ScratchDir dir;
    ASSERT_TRUE(testing::run_python(dir, kArrays));
    auto src = open_source(dir / "x.npy");
    ASSERT_EQ(src->size(), 11);
    Example ex = src->get(3);
    ASSERT_EQ(ex.count("input"), 1u);
    EXPECT_EQ(ex.at("input").data_as<float>()[5], 0.5f * (3 * 6 + 5) - 3);
    SourceOptions opts;
    opts.rename = {{"input", "image"}};
    EXPECT_EQ(open_source(dir / "x.npy", opts)->get(0).count("image"), 1u);
}

TEST(CsvSource, FeaturesAndIntegralLabels) {
    ScratchDir dir;
    testing::write_file(dir / "iris.csv",
                        "a,b,species,c\n"
                        "1.5, 2, 0, -3e-1\r\n"
                        "\n"
                        "4,5.25,2,6\n"
                        "\"7\",8,1,9\n");
    SourceOptions opts;
    opts.label_column = "species";
    auto src = open_source(dir / "iris.csv", opts);
    ASSERT_EQ(src->size(), 3);
    Example r0 = src->get(0), r2 = src->get(2);
    ASSERT_EQ(r0.at("input").shape(), Shape{3});
    EXPECT_EQ(r0.at("input").data_as<float>()[0], 1.5f);
    EXPECT_EQ(r0.at("input").data_as<float>()[1], 2.0f);
    EXPECT_EQ(r0.at("input").data_as<float>()[2], -0.3f);
    ASSERT_EQ(r0.at("labels").dtype(), DType::kInt64);
    EXPECT_EQ(r0.at("labels").data_as<int64_t>()[0], 0);
    EXPECT_EQ(r2.at("labels").data_as<int64_t>()[0], 1);
    EXPECT_EQ(r2.at("input").data_as<float>()[2], 9.0f);
    EXPECT_EQ(src->describe(), dir / "iris.csv" + " (3 records: input f32[3], labels i64[])");

    // Default label column: the last; non-integral labels stay f32.
    testing::write_file(dir / "reg.csv", "x,y\n1,0.5\n2,1.5\n");
    auto reg = open_source(dir / "reg.csv");
    EXPECT_EQ(reg->get(1).at("labels").dtype(), DType::kFloat32);
    EXPECT_EQ(reg->get(1).at("labels").data_as<float>()[0], 1.5f);
}

std::string csv_error(const std::string& path, const SourceOptions& opts = {}) {
    try {
        open_source(path, opts);
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

TEST(CsvSource, BadRowsNameFileAndLine) {
    ScratchDir dir;
    testing::write_file(dir / "short.csv", "a,b,label\n1,2,0\n3,4\n");
    std::string e = csv_error(dir / "short.csv");
    EXPECT_NE(e.find("short.csv:3: expected 3 fields (as in the header), got 2"), std::string::npos) << e;

    testing::write_file(dir / "nan.csv", "a,b,label\n1,2,0\n\n3,x4,1\n");
    e = csv_error(dir / "nan.csv");
    EXPECT_NE(e.find("nan.csv:4: field 2 ('b') is not a number: 'x4'"), std::string::npos) << e;

    testing::write_file(dir / "empty_field.csv", "a,b,label\n1,,0\n");
    e = csv_error(dir / "empty_field.csv");
    EXPECT_NE(e.find("empty_field.csv:2: field 2"), std::string::npos) << e;

    SourceOptions opts;
    opts.label_column = "target";
    testing::write_file(dir / "nolabel.csv", "a,b,label\n1,2,0\n");
    e = csv_error(dir / "nolabel.csv", opts);
    EXPECT_NE(e.find("no label column 'target'"), std::string::npos) << e;
}

TEST(OpenSource, SubsetAndErrors) {
    ScratchDir dir;
    testing::write_file(dir / "d.csv", "x,y\n0,0\n1,1\n2,0\n3,1\n4,0\n");
    auto src = open_source(dir / "d.csv");
    auto tail = subset(src, 3, 5);
    ASSERT_EQ(tail->size(), 2);
    EXPECT_EQ(tail->get(0).at("input").data_as<float>()[0], 3.0f);
    EXPECT_EQ(tail->get(1).at("input").data_as<float>()[0], 4.0f);
    EXPECT_THROW(tail->get(2), Error);
    EXPECT_THROW(subset(src, 2, 6), Error);
    EXPECT_THROW(subset(src, 3, 2), Error);
    EXPECT_THROW(open_source(dir / "missing.npz"), Error);
    testing::write_file(dir / "data.bin", "x");
    EXPECT_THROW(open_source(dir / "data.bin"), Error);
}

}  // namespace
}  // namespace kiln::data
