// SessionOptions::symbolic_shapes (docs/dynamic_shapes.md): a model compiled once runs at every
// batch size and sequence length; kernels take the dims as parameters and the memory plan is
// evaluated per run. References are naive loops written here (the ONNX Runtime comparison is
// tests/python/test_symbolic_shapes.py).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "../frontend/onnx_model_builder.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

class SymbolicSessionTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_symbolic_test_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string save(const onnx::ModelProto& m) {
        std::string path = (dir_ / "model.onnx").string();
        std::ofstream f(path, std::ios::binary);
        m.SerializeToOstream(&f);
        return path;
    }
    fs::path dir_;
};

std::vector<float> weights(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float> w(n);
    for (float& v : w) v = u(rng);
    return w;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
    Tensor t(DType::kFloat32, shape);
    std::vector<float> v = weights(static_cast<size_t>(t.numel()), seed);
    std::copy(v.begin(), v.end(), t.data_as<float>());
    return t;
}

constexpr int64_t kIn = 48, kHidden = 70, kOut = 33;  // not multiples of the tiles

/// y = Relu(x W1 + b1) W2 + b2 with x [N, 48]: a symbolic batch through two matrix products
/// (packed-weight kernels), a broadcast bias add and a Relu.
onnx::ModelProto mlp_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), kIn});
    add_float_init(g, "W1", {kIn, kHidden}, weights(kIn * kHidden, 1));
    add_float_init(g, "b1", {kHidden}, weights(kHidden, 2));
    add_float_init(g, "W2", {kHidden, kOut}, weights(kHidden * kOut, 3));
    add_float_init(g, "b2", {kOut}, weights(kOut, 4));
    add_node(g, "MatMul", {"x", "W1"}, {"h0"}, "mm1");
    add_node(g, "Add", {"h0", "b1"}, {"h1"}, "add1");
    add_node(g, "Relu", {"h1"}, {"h"}, "relu");
    add_node(g, "MatMul", {"h", "W2"}, {"y0"}, "mm2");
    add_node(g, "Add", {"y0", "b2"}, {"y"}, "add2");
    add_output(g, "y", {std::string("N"), kOut});
    return m;
}

std::vector<float> dense(const std::vector<float>& x, int64_t n, int64_t k, const std::vector<float>& w,
                         const std::vector<float>& b, int64_t m, bool relu) {
    std::vector<float> y(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
            double acc = b[static_cast<size_t>(j)];
            for (int64_t p = 0; p < k; ++p) acc += double(x[static_cast<size_t>(i * k + p)]) * w[static_cast<size_t>(p * m + j)];
            y[static_cast<size_t>(i * m + j)] = relu ? std::max(static_cast<float>(acc), 0.0f) : static_cast<float>(acc);
        }
    return y;
}

std::vector<float> mlp_reference(const Tensor& x) {
    const int64_t n = x.shape()[0];
    std::vector<float> xs(x.data_as<float>(), x.data_as<float>() + x.numel());
    std::vector<float> h = dense(xs, n, kIn, weights(kIn * kHidden, 1), weights(kHidden, 2), kHidden, true);
    return dense(h, n, kHidden, weights(kHidden * kOut, 3), weights(kOut, 4), kOut, false);
}

void expect_close(const Tensor& got, const std::vector<float>& want) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got.data_as<float>()[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
}

SessionOptions symbolic_options() {
    SessionOptions o;
    o.threads = 2;
    o.symbolic_shapes = true;
    return o;
}

TEST_F(SymbolicSessionTest, OneCompileServesEveryBatchSize) {
    auto s = Session::load(save(mlp_model()), symbolic_options());
    ASSERT_TRUE(s->stats().symbolic) << s->stats().symbolic_reason;
    EXPECT_EQ(s->stats().compiles, 1);  // at load
    for (int64_t n : {1, 3, 8, 1, 64, 5, 0}) {
        Tensor x = random_tensor({n, kIn}, static_cast<uint32_t>(100 + n));
        std::vector<Tensor> out = s->run({{"x", x}});
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].shape(), (Shape{n, kOut}));
        expect_close(out[0], mlp_reference(x));
    }
    EXPECT_EQ(s->stats().compiles, 1);
    EXPECT_EQ(s->stats().specializations, 1);
    EXPECT_NE(s->kernel_list().find("kernels"), std::string::npos);
}

/// Softmax over the attention scores' symbolic row, x: [batch, 12, seq, seq]: the row reduces
/// its full 16-lane steps unguarded and the tail in the combine stage (op/defs/row_reduce.h),
/// and the rows run in parallel over the [batch, 12] heads. Lengths below one vector, at
/// multiples of it, and with both full steps and a tail; batch 0 runs no row.
TEST_F(SymbolicSessionTest, SoftmaxAlongASymbolicRowAtEveryLength) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("batch"), int64_t{12}, std::string("seq"), std::string("seq")});
    attr_int(add_node(g, "Softmax", {"x"}, {"y"}, "probs"), "axis", -1);
    add_output(g, "y", {std::string("batch"), int64_t{12}, std::string("seq"), std::string("seq")});
    auto s = Session::load(save(m), symbolic_options());
    ASSERT_TRUE(s->stats().symbolic) << s->stats().symbolic_reason;
    for (auto [b, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {2, 16}, {1, 33}, {3, 47}, {0, 5}, {1, 64}}) {
        Tensor x = random_tensor({b, 12, seq, seq}, static_cast<uint32_t>(7 * seq + b));
        for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] *= 8.0f;  // rows with a clear max
        std::vector<float> want(static_cast<size_t>(x.numel()));
        const float* xv = x.data_as<float>();
        for (int64_t r = 0; r < b * 12 * seq; ++r) {  // naive, in double
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < seq; ++j) mx = std::max(mx, double(xv[r * seq + j]));
            for (int64_t j = 0; j < seq; ++j) sum += std::exp(double(xv[r * seq + j]) - mx);
            for (int64_t j = 0; j < seq; ++j)
                want[static_cast<size_t>(r * seq + j)] = static_cast<float>(std::exp(double(xv[r * seq + j]) - mx) / sum);
        }
        std::vector<Tensor> out = s->run({{"x", x}});
        ASSERT_EQ(out[0].shape(), (Shape{b, 12, seq, seq}));
        expect_close(out[0], want);
    }
    EXPECT_EQ(s->stats().compiles, 1);
}

TEST_F(SymbolicSessionTest, StaticAxisAndDtypeErrorsNameTheInput) {
    auto s = Session::load(save(mlp_model()), symbolic_options());
    try {
        s->run({{"x", random_tensor({2, kIn + 1}, 1)}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
    }
    Tensor x = random_tensor({4, kIn}, 9);
    expect_close(s->run({{"x", x}})[0], mlp_reference(x));
}

/// z = (a + b) * c with a, b: [seq, 16], c: [16]; one dim shared by two inputs.
onnx::ModelProto two_input_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "a", {std::string("seq"), int64_t{16}});
    add_input(g, "b", {std::string("seq"), int64_t{16}});
    add_float_init(g, "c", {16}, weights(16, 5));
    add_node(g, "Add", {"a", "b"}, {"s"}, "add");
    add_node(g, "Mul", {"s", "c"}, {"z"}, "mul");
    add_output(g, "z", {std::string("seq"), int64_t{16}});
    return m;
}

TEST_F(SymbolicSessionTest, DisagreeingDimNamesInputDimAndBothValues) {
    auto s = Session::load(save(two_input_model()), symbolic_options());
    ASSERT_TRUE(s->stats().symbolic) << s->stats().symbolic_reason;
    try {
        s->run({{"a", random_tensor({7, 16}, 1)}, {"b", random_tensor({9, 16}, 2)}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        for (const char* part : {"input 'b'", "'seq'", "7", "9"}) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
    const std::vector<float> c = weights(16, 5);
    for (int64_t seq : {7, 64, 128}) {
        Tensor a = random_tensor({seq, 16}, 11), b = random_tensor({seq, 16}, 12);
        std::vector<float> want(static_cast<size_t>(seq * 16));
        for (int64_t i = 0; i < seq * 16; ++i)
            want[static_cast<size_t>(i)] = (a.data_as<float>()[i] + b.data_as<float>()[i]) * c[static_cast<size_t>(i % 16)];
        expect_close(s->run({{"a", a}, {"b", b}})[0], want);
    }
    EXPECT_EQ(s->stats().compiles, 1);
}

TEST_F(SymbolicSessionTest, UnsupportedOpCompilesPerShapeAndSaysWhy) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{8}});
    add_node(g, "Tan", {"x"}, {"y"}, "tan");  // not in the symbolic subset
    add_output(g, "y", {std::string("N"), int64_t{8}});
    auto s = Session::load(save(m), symbolic_options());
    EXPECT_FALSE(s->stats().symbolic);
    EXPECT_NE(s->stats().symbolic_reason.find("Tan"), std::string::npos) << s->stats().symbolic_reason;
    for (int64_t n : {2, 3}) {
        Tensor x = random_tensor({n, 8}, 3);
        std::vector<float> want(static_cast<size_t>(n * 8));
        for (int64_t i = 0; i < n * 8; ++i) want[static_cast<size_t>(i)] = std::tan(x.data_as<float>()[i]);
        expect_close(s->run({{"x", x}})[0], want);
    }
    EXPECT_EQ(s->stats().compiles, 2);  // one per shape, as without the option
}

}  // namespace
}  // namespace kiln
