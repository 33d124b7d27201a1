// RunOptions::outputs_into (ONNX Runtime's IOBinding): a compiled model's kernels write the bound
// outputs straight into the caller's memory, with both executors and at every specialization;
// outputs the kernels do not write (an input passed through) are copied in; a wrong name, dtype
// or shape is an error naming the output, expected vs got, that leaves the buffer untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "../frontend/onnx_model_builder.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

class OutputsIntoTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_outputs_into_test_" + std::to_string(::getpid()) + "_" +
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

const std::vector<float> kW = {0.5f, -1, 0.25f, 2, 0, -0.5f, 1, 1.5f, -2, 0.75f, -0.25f, 1};
const std::vector<float> kB = {0.5f, -0.25f, 0.125f};

/// y = Relu(x @ W + b), x: [N, 4] (symbolic N), W: [4, 3]; x also passed through as output "xs".
onnx::ModelProto model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W", {4, 3}, kW);
    add_float_init(g, "b", {3}, kB);
    add_node(g, "MatMul", {"x", "W"}, {"xw"}, "mm");
    add_node(g, "Add", {"xw", "b"}, {"z"}, "add");
    add_node(g, "Relu", {"z"}, {"y"}, "relu");
    add_node(g, "Identity", {"x"}, {"xs"}, "pass");
    add_output(g, "y", {std::string("N"), int64_t{3}});
    add_output(g, "xs", {std::string("N"), int64_t{4}});
    return m;
}

/// Plain loops, independent of Kiln.
std::vector<float> reference(const std::vector<float>& x) {
    const size_t n = x.size() / 4;
    std::vector<float> y(n * 3);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < 3; ++j) {
            float acc = kB[j];
            for (size_t k = 0; k < 4; ++k) acc += x[i * 4 + k] * kW[k * 3 + j];
            y[i * 3 + j] = std::max(acc, 0.0f);
        }
    return y;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << i;
}

TEST_F(OutputsIntoTest, KernelsWriteTheCallersBufferWithBothExecutors) {
    for (ExecutorKind kind : {ExecutorKind::kSequential, ExecutorKind::kDataflow}) {
        SessionOptions so;
        so.executor = kind;
        so.inter_op_threads = 2;
        auto s = Session::load(save(model()), so);
        for (int64_t n : {2, 5, 2}) {  // two specializations, the first one again
            std::vector<float> x = random_values(n * 4, static_cast<uint32_t>(n));
            std::vector<float> y(n * 3, std::numeric_limits<float>::quiet_NaN());
            std::map<std::string, Tensor> into{{"y", Tensor::borrow(DType::kFloat32, {n, 3}, y.data())}};
            RunOptions ro;
            ro.outputs_into = &into;
            std::vector<Tensor> out = s->run({{"x", Tensor::borrow(DType::kFloat32, {n, 4}, x.data())}}, ro);
            ASSERT_EQ(out.size(), 2u);
            EXPECT_EQ(out[0].data(), static_cast<void*>(y.data())) << "the caller's buffer is returned";
            expect_near(y, reference(x));
            EXPECT_NE(out[1].data(), static_cast<void*>(x.data()));  // unbound: a fresh tensor
            expect_near(std::vector<float>(out[1].data_as<float>(), out[1].data_as<float>() + n * 4), x);
        }
    }
}

TEST_F(OutputsIntoTest, AnOutputTheKernelsDoNotWriteIsCopiedIn) {
    auto s = Session::load(save(model()));
    std::vector<float> x = random_values(8, 3), xs(8, -7), y(6, -7);
    std::map<std::string, Tensor> into{{"xs", Tensor::borrow(DType::kFloat32, {2, 4}, xs.data())},
                                       {"y", Tensor::borrow(DType::kFloat32, {2, 3}, y.data())}};
    RunOptions ro;
    ro.outputs_into = &into;
    std::vector<Tensor> out = s->run({{"x", Tensor::borrow(DType::kFloat32, {2, 4}, x.data())}}, ro);
    EXPECT_EQ(out[1].data(), static_cast<void*>(xs.data()));
    expect_near(xs, x);
    expect_near(y, reference(x));
}

TEST_F(OutputsIntoTest, BadBindingsNameTheOutputAndLeaveTheBufferAlone) {
    auto s = Session::load(save(model()));
    std::vector<float> x = random_values(8, 4);
    std::vector<float> y(8, -7);
    std::vector<int64_t> yi(6, -7);
    auto expect_error = [&](std::map<std::string, Tensor> into, const std::vector<std::string>& parts) {
        RunOptions ro;
        ro.outputs_into = &into;
        try {
            s->run({{"x", Tensor::borrow(DType::kFloat32, {2, 4}, x.data())}}, ro);
            FAIL() << "expected an error";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
        }
    };
    expect_error({{"y", Tensor::borrow(DType::kFloat32, {2, 4}, y.data())}}, {"output 'y'", "f32[2,3]", "f32[2,4]"});
    expect_error({{"y", Tensor::borrow(DType::kInt64, {2, 3}, yi.data())}}, {"output 'y'", "f32", "i64"});
    expect_error({{"nope", Tensor::borrow(DType::kFloat32, {2, 3}, y.data())}}, {"'nope'", "'y'", "'xs'"});
    for (float v : y) EXPECT_EQ(v, -7);
    for (int64_t v : yi) EXPECT_EQ(v, -7);
    // Not with preemption (a suspended run would keep writing the caller's memory later).
    Preemption p;
    std::map<std::string, Tensor> into{{"y", Tensor::borrow(DType::kFloat32, {2, 3}, y.data())}};
    RunOptions ro;
    ro.outputs_into = &into;
    ro.preempt = &p;
    EXPECT_THROW(s->run({{"x", Tensor::borrow(DType::kFloat32, {2, 4}, x.data())}}, ro), Error);
    // The session stays usable.
    std::vector<Tensor> out = s->run({{"x", Tensor::borrow(DType::kFloat32, {2, 4}, x.data())}});
    expect_near(std::vector<float>(out[0].data_as<float>(), out[0].data_as<float>() + 6), reference(x));
}

}  // namespace
}  // namespace kiln
