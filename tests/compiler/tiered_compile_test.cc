// Tiered compiles through a Session (SessionOptions::tiered_compile, compiler/kernel_upgrade.h):
// with a cold kernel cache the session runs on quickly built kernels, their -O3 builds replace
// them while runs go on, and a later session finds the -O3 builds in the cache. The reference
// is a naive loop written here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "../frontend/onnx_model_builder.h"
#include "../scoped_env.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

using kiln::testing::ScopedEnv;

/// Widths of the layers: every MatMul+Relu has its own shape, so each is a kernel of its own.
std::vector<int64_t> layer_widths(int layers) {
    std::vector<int64_t> w;
    for (int i = 0; i <= layers; ++i) w.push_back(4 + i);
    return w;
}

float weight(int layer, int64_t i) { return 0.05f * static_cast<float>((i * 7 + layer) % 11) - 0.2f; }

/// y = Relu(... Relu(Relu(x @ W0) @ W1) ... ), x: [2, 4].
onnx::ModelProto deep_model(int layers) {
    const std::vector<int64_t> w = layer_widths(layers);
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}, w[0]});
    std::string h = "x";
    for (int l = 0; l < layers; ++l) {
        std::vector<float> values(static_cast<size_t>(w[l] * w[l + 1]));
        for (size_t i = 0; i < values.size(); ++i) values[i] = weight(l, static_cast<int64_t>(i));
        const std::string n = std::to_string(l);
        add_float_init(g, "W" + n, {w[l], w[l + 1]}, values);
        add_node(g, "MatMul", {h, "W" + n}, {"mm" + n}, "mm" + n);
        add_node(g, "Relu", {"mm" + n}, {"h" + n}, "relu" + n);
        h = "h" + n;
    }
    add_node(g, "Identity", {h}, {"y"}, "out");
    add_output(g, "y", {int64_t{2}, w[layers]});
    return m;
}

std::vector<float> deep_reference(const Tensor& x, int layers) {
    const std::vector<int64_t> w = layer_widths(layers);
    std::vector<float> h(x.data_as<float>(), x.data_as<float>() + x.numel());
    for (int l = 0; l < layers; ++l) {
        std::vector<float> next(static_cast<size_t>(2 * w[l + 1]));
        for (int64_t r = 0; r < 2; ++r)
            for (int64_t j = 0; j < w[l + 1]; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < w[l]; ++k) acc += h[r * w[l] + k] * weight(l, k * w[l + 1] + j);
                next[r * w[l + 1] + j] = static_cast<float>(std::max(acc, 0.0));
            }
        h = std::move(next);
    }
    return h;
}

void expect_close(const Tensor& got, const std::vector<float>& want) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got.data_as<float>()[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
}

class TieredCompile : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_tiered_test_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        // More kernels than the compile runs processes at once: a cold compile tiers.
        layers_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 3;
        path_ = (dir_ / "deep.onnx").string();
        std::ofstream f(path_, std::ios::binary);
        deep_model(layers_).SerializeToOstream(&f);
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-1, 1);
        for (int64_t i = 0; i < x_.numel(); ++i) x_.data_as<float>()[i] = u(rng);
        opts_.kernels = "generated";  // every MatMul a kernel the C compiler builds
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::vector<float> reference() const { return deep_reference(x_, layers_); }
    std::vector<Tensor> run(Session& s) const { return s.run({{"x", x_}}); }

    fs::path dir_;
    int layers_ = 0;
    std::string path_;
    Tensor x_{DType::kFloat32, {2, 4}};
    SessionOptions opts_;
};

TEST_F(TieredCompile, QuickKernelsRunUntilTheirO3BuildsReplaceThemAndTheCacheKeepsThose) {
    ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "cache").c_str());
    ScopedEnv tiers("KILN_TIERED_COMPILE", nullptr);
    auto first = Session::load(path_, opts_);
    SessionStats st = first->stats();
    EXPECT_GE(st.quick_kernels, layers_);
    EXPECT_GT(st.compiled, 0);
    // Runs go on while the -O3 builds replace the quick kernels, each right.
    int runs = 0;
    do {
        expect_close(run(*first)[0], reference());
        ++runs;
    } while (!first->stats().optimized_kernels_running && runs < 100000);
    first->wait_for_optimized_kernels();
    st = first->stats();
    EXPECT_TRUE(st.optimized_kernels_running);
    EXPECT_GT(st.optimize_seconds, 0);
    expect_close(run(*first)[0], reference());

    // The next session finds the -O3 builds (the same kernel units) and compiles nothing.
    auto second = Session::load(path_, opts_);
    EXPECT_EQ(second->stats().compiled, 0);
    EXPECT_EQ(second->stats().quick_kernels, 0);
    expect_close(run(*second)[0], reference());
}

TEST_F(TieredCompile, OffCompilesO3FromTheStart) {
    ScopedEnv tiers("KILN_TIERED_COMPILE", nullptr);
    {
        ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "off").c_str());
        SessionOptions off = opts_;
        off.tiered_compile = false;
        auto s = Session::load(path_, off);
        EXPECT_GT(s->stats().compiled, 0);
        EXPECT_EQ(s->stats().quick_kernels, 0);
        expect_close(run(*s)[0], reference());
    }
    ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "env").c_str());
    ScopedEnv env_off("KILN_TIERED_COMPILE", "0");
    auto s = Session::load(path_, opts_);
    EXPECT_GT(s->stats().compiled, 0);
    EXPECT_EQ(s->stats().quick_kernels, 0);
}

}  // namespace
}  // namespace kiln
