// TensorProto conversion: typed fields, raw data, external data (with containment checks),
// size validation, and the ONNX test-suite .pb reader.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "onnx_model_builder.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;
using namespace testing;

template <typename F>
ErrorKind kind_of(F&& f, std::string* msg = nullptr) {
    try {
        f();
    } catch (const Error& e) {
        if (msg) *msg = e.what();
        return e.kind();
    }
    ADD_FAILURE() << "expected a kiln::Error";
    return ErrorKind::kInternal;
}

onnx::TensorProto int32_field_tensor(int type, const std::vector<int32_t>& v) {
    onnx::TensorProto t;
    t.set_name("t");
    t.set_data_type(type);
    t.add_dims(static_cast<int64_t>(v.size()));
    for (int32_t x : v) t.add_int32_data(x);
    return t;
}

TEST(TensorProto, TypedFields) {
    // f16 bit patterns in int32_data: 0x3C00 = 1.0, 0xC000 = -2.0, 0x3800 = 0.5.
    Tensor h = tensor_from_proto(int32_field_tensor(onnx::TensorProto::FLOAT16, {0x3C00, 0xC000, 0x3800}), ".", "t");
    EXPECT_EQ(h.dtype(), DType::kFloat16);
    EXPECT_EQ(h.get_f64(0), 1.0);
    EXPECT_EQ(h.get_f64(1), -2.0);
    EXPECT_EQ(h.get_f64(2), 0.5);
    // bf16 0x4040 = 3.0
    Tensor bf = tensor_from_proto(int32_field_tensor(onnx::TensorProto::BFLOAT16, {0x4040}), ".", "t");
    EXPECT_EQ(bf.get_f64(0), 3.0);
    Tensor i8 = tensor_from_proto(int32_field_tensor(onnx::TensorProto::INT8, {-128, 127, -1}), ".", "t");
    EXPECT_EQ(i8.dtype(), DType::kInt8);
    EXPECT_EQ(i8.get_i64(0), -128);
    EXPECT_EQ(i8.get_i64(2), -1);
    Tensor u16 = tensor_from_proto(int32_field_tensor(onnx::TensorProto::UINT16, {65535, 7}), ".", "t");
    EXPECT_EQ(u16.get_i64(0), 65535);
    Tensor b = tensor_from_proto(int32_field_tensor(onnx::TensorProto::BOOL, {1, 0, 1}), ".", "t");
    EXPECT_EQ(b.dtype(), DType::kBool);
    EXPECT_EQ(b.get_i64(0), 1);
    EXPECT_EQ(b.get_i64(1), 0);

    onnx::TensorProto i64;
    i64.set_data_type(onnx::TensorProto::INT64);
    i64.add_dims(2);
    i64.add_int64_data(int64_t{1} << 40);
    i64.add_int64_data(-3);
    Tensor ti = tensor_from_proto(i64, ".", "t");
    EXPECT_EQ(ti.get_i64(0), int64_t{1} << 40);
    EXPECT_EQ(ti.get_i64(1), -3);

    onnx::TensorProto u64;
    u64.set_data_type(onnx::TensorProto::UINT64);
    u64.add_dims(1);
    u64.add_uint64_data(~uint64_t{0});
    EXPECT_EQ(tensor_from_proto(u64, ".", "t").data_as<uint64_t>()[0], ~uint64_t{0});

    onnx::TensorProto f64;
    f64.set_data_type(onnx::TensorProto::DOUBLE);
    f64.add_dims(1);
    f64.add_dims(2);
    f64.add_double_data(0.1);
    f64.add_double_data(-1e300);
    Tensor td = tensor_from_proto(f64, ".", "t");
    EXPECT_EQ(td.shape(), (Shape{1, 2}));
    EXPECT_EQ(td.get_f64(0), 0.1);
    EXPECT_EQ(td.get_f64(1), -1e300);
}

TEST(TensorProto, RawDataAndSizeMismatch) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT32);
    t.add_dims(2);
    int32_t vals[2] = {123456, -7};
    t.set_raw_data(std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
    Tensor r = tensor_from_proto(t, ".", "t");
    EXPECT_EQ(r.get_i64(0), 123456);
    EXPECT_EQ(r.get_i64(1), -7);

    t.add_dims(2);  // now [2,2]: 16 bytes expected, 8 given
    std::string msg;
    EXPECT_EQ(kind_of([&] { tensor_from_proto(t, ".", "initializer 'w'"); }, &msg), ErrorKind::kInvalidModel);
    EXPECT_NE(msg.find("initializer 'w'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected 16"), std::string::npos) << msg;

    onnx::TensorProto f = int32_field_tensor(onnx::TensorProto::INT32, {1, 2, 3});
    f.set_dims(0, 4);
    EXPECT_EQ(kind_of([&] { tensor_from_proto(f, ".", "t"); }), ErrorKind::kInvalidModel);

    onnx::TensorProto huge;
    huge.set_data_type(onnx::TensorProto::FLOAT);
    huge.add_dims(int64_t{1} << 40);
    huge.add_dims(int64_t{1} << 40);
    EXPECT_EQ(kind_of([&] { tensor_from_proto(huge, ".", "t"); }), ErrorKind::kInvalidModel);
    huge.set_dims(0, -1);
    EXPECT_EQ(kind_of([&] { tensor_from_proto(huge, ".", "t"); }), ErrorKind::kInvalidModel);

    onnx::TensorProto str;
    str.set_data_type(onnx::TensorProto::STRING);
    str.add_string_data("a");
    str.add_dims(2);  // two elements declared, one given
    EXPECT_EQ(kind_of([&] { tensor_from_proto(str, ".", "t"); }), ErrorKind::kInvalidModel);
    str.add_string_data("b");
    EXPECT_EQ(tensor_from_proto(str, ".", "t").data_as<std::string>()[1], "b");
    str.set_raw_data("ab");  // strings never come as raw bytes
    EXPECT_EQ(kind_of([&] { tensor_from_proto(str, ".", "t"); }), ErrorKind::kInvalidModel);

    onnx::TensorProto cplx;
    cplx.set_data_type(onnx::TensorProto::COMPLEX64);
    cplx.add_dims(1);
    EXPECT_EQ(kind_of([&] { tensor_from_proto(cplx, ".", "t"); }), ErrorKind::kUnsupported);
}

class ExternalData : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_fe_ext_" + std::to_string(::getpid()));
        fs::create_directories(dir_ / "sub");
        // 8 junk bytes then 6 floats.
        std::ofstream out(dir_ / "sub" / "weights.bin", std::ios::binary);
        out.write("JUNKJUNK", 8);
        for (int i = 0; i < 6; ++i) {
            float f = 1.5f * i - 2.0f;
            out.write(reinterpret_cast<const char*>(&f), 4);
        }
        std::ofstream(dir_.parent_path() / ("kiln_fe_outside_" + std::to_string(::getpid()) + ".bin"))
            << std::string(24, 'x');
    }
    void TearDown() override {
        fs::remove_all(dir_);
        fs::remove(dir_.parent_path() / ("kiln_fe_outside_" + std::to_string(::getpid()) + ".bin"));
    }

    // Writes model.onnx: y = x + W where W [2,3] lives in external data.
    std::string write_model(const std::string& location, const std::string& offset, const std::string& length) {
        onnx::ModelProto m = make_model(13);
        auto* g = m.mutable_graph();
        add_input(g, "x", {int64_t{2}, int64_t{3}});
        auto* w = g->add_initializer();
        w->set_name("W");
        w->set_data_type(onnx::TensorProto::FLOAT);
        w->add_dims(2);
        w->add_dims(3);
        w->set_data_location(onnx::TensorProto::EXTERNAL);
        auto kv = [&](const char* k, const std::string& v) {
            if (v.empty()) return;
            auto* e = w->add_external_data();
            e->set_key(k);
            e->set_value(v);
        };
        kv("location", location);
        kv("offset", offset);
        kv("length", length);
        add_node(g, "Add", {"x", "W"}, {"y"});
        add_output(g, "y");
        std::string path = (dir_ / "model.onnx").string();
        std::ofstream(path, std::ios::binary) << serialize(m);
        return path;
    }

    fs::path dir_;
};

TEST_F(ExternalData, ReadsSliceRelativeToModelDir) {
    ir::Graph g = import_onnx_file(write_model("sub/weights.bin", "8", "24"));
    const Tensor& w = g.find_value("W")->constant();
    EXPECT_EQ(w.shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(w.get_f64(i), 1.5 * i - 2.0);
    // Without length: reads numel * 4 bytes from the offset.
    ir::Graph g2 = import_onnx_file(write_model("sub/weights.bin", "8", ""));
    EXPECT_EQ(g2.find_value("W")->constant().get_f64(5), 5.5);
}

TEST_F(ExternalData, RejectsBadLocationsAndSizes) {
    std::string out = "../kiln_fe_outside_" + std::to_string(::getpid()) + ".bin";
    std::string msg;
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model(out, "", "")); }, &msg), ErrorKind::kInvalidModel);
    EXPECT_NE(msg.find("outside the model directory"), std::string::npos) << msg;
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("sub/../../x.bin", "", "")); }), ErrorKind::kInvalidModel);
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("/etc/passwd", "", "")); }), ErrorKind::kInvalidModel);
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("sub/missing.bin", "", "")); }), ErrorKind::kIOError);
    // 8 + 24 bytes available; offset 16 leaves only 16.
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("sub/weights.bin", "16", "")); }), ErrorKind::kInvalidModel);
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("sub/weights.bin", "8", "20")); }), ErrorKind::kInvalidModel);
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("sub/weights.bin", "-8", "")); }), ErrorKind::kInvalidModel);
    EXPECT_EQ(kind_of([&] { import_onnx_file(write_model("", "", "")); }), ErrorKind::kInvalidModel);
}

TEST_F(ExternalData, ReadTensorProtoFile) {
    onnx::TensorProto t = int32_field_tensor(onnx::TensorProto::INT32, {5, -6, 7});
    std::string path = (dir_ / "input_0.pb").string();
    std::ofstream(path, std::ios::binary) << t.SerializeAsString();
    Tensor r = read_tensor_proto_file(path);
    EXPECT_EQ(r.shape(), (Shape{3}));
    EXPECT_EQ(r.get_i64(1), -6);
    EXPECT_EQ(kind_of([&] { read_tensor_proto_file((dir_ / "nope.pb").string()); }), ErrorKind::kIOError);
    std::ofstream(dir_ / "bad.pb", std::ios::binary) << std::string("\x0a\xff\xff\xff\xff\x0f", 6);
    EXPECT_EQ(kind_of([&] { read_tensor_proto_file((dir_ / "bad.pb").string()); }), ErrorKind::kInvalidModel);
}

// The ONNX backend test data shipped with the onnx Python package, if installed.
std::string onnx_package_dir() {
    FILE* p = popen("python3 -c \"import onnx,os;print(os.path.dirname(onnx.__file__))\" 2>/dev/null", "r");
    if (!p) return "";
    char buf[4096] = {0};
    std::string out;
    while (fgets(buf, sizeof(buf), p)) out += buf;
    pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

TEST(OnnxTestData, ReluModelAndInput) {
    std::string pkg = onnx_package_dir();
    fs::path dir = fs::path(pkg) / "backend/test/data/node/test_relu";
    if (pkg.empty() || !fs::exists(dir / "model.onnx")) GTEST_SKIP() << "onnx test data not found";
    ir::Graph g = import_onnx_file((dir / "model.onnx").string());
    ASSERT_EQ(g.num_nodes(), 1u);
    EXPECT_EQ(g.nodes()[0]->op(), "Relu");
    ASSERT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(g.inputs()[0]->type(), ir::TensorType::of_static(DType::kFloat32, {3, 4, 5}));
    Tensor x = read_tensor_proto_file((dir / "test_data_set_0/input_0.pb").string());
    Tensor y = read_tensor_proto_file((dir / "test_data_set_0/output_0.pb").string());
    ASSERT_EQ(x.shape(), (Shape{3, 4, 5}));
    ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
    // The expected output is relu of the input (computed here independently).
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.get_f64(i), std::max(0.0, x.get_f64(i)));
}

}  // namespace
}  // namespace kiln::frontend
