// The compile-time probe (compiler/kernel_probe.h): a convolution auto's rule is unsure about (a
// grouped one) is measured once, its verdict lands in kernel_probe.jsonl beside the kernel cache
// with both times, the compiled model takes the kernel the verdict names, and a second compile
// measures nothing; a convolution the rule is sure about (1x1, 64 channels, 28x28) is not
// measured; KILN_KERNEL_PROBE=0 measures nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "runtime/extern_kernel.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using Ints = std::vector<int64_t>;

ir::TensorType f32(const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

Tensor weights(const Shape& s, uint32_t seed) {
    Tensor t(DType::kFloat32, s);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
}

// x [1,64,28,28] -> grouped 3x3 conv (8 groups) -> 1x1 conv 64->64.
ir::Graph two_convs() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, 64, 28, 28}));
    ir::Value* w1 = g.add_constant("w1", weights({64, 8, 3, 3}, 1));
    ir::Value* w2 = g.add_constant("w2", weights({64, 64, 1, 1}, 2));
    ir::Value* y = g.add_node("Conv", {x, w1},
                              {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{8}}},
                              {f32({1, 64, 28, 28})}, {"y"}, "grouped")
                       ->output(0);
    ir::Value* z = g.add_node("Conv", {y, w2}, {{"kernel_shape", Ints{1, 1}}}, {f32({1, 64, 28, 28})}, {"z"}, "pointwise")
                       ->output(0);
    g.add_output(z);
    return g;
}

std::vector<nlohmann::json> verdicts(const fs::path& dir) {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir / "kernel_probe.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

struct ScopedCacheDir {
    fs::path dir;
    explicit ScopedCacheDir(const std::string& probe) {
        dir = fs::temp_directory_path() / ("kiln_probe_test_" + std::to_string(::getpid()) + "_" + probe);
        fs::remove_all(dir);
        fs::create_directories(dir);
        ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
        ::setenv("KILN_KERNEL_PROBE", probe.c_str(), 1);
    }
    ~ScopedCacheDir() {
        ::unsetenv("KILN_CACHE_DIR");
        ::unsetenv("KILN_KERNEL_PROBE");
        fs::remove_all(dir);
    }
};

int extern_kernels(const CompiledModel& m) {
    int n = 0;
    for (const KernelInfo& k : m.kernels) n += !k.extern_name.empty();
    return n;
}

TEST(KernelProbe, MeasuresWhatTheRuleIsUnsureAboutOnceAndFollowsTheVerdict) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ScopedCacheDir cache("1");
    ir::Graph g = two_convs();
    CompiledModel m = compile(g, {});
    std::vector<nlohmann::json> v = verdicts(cache.dir);
    ASSERT_EQ(v.size(), 1u) << "the grouped conv only";
    const double gen = v[0].at("generated_s"), dnnl = v[0].at("dnnl_s");
    EXPECT_GT(gen, 0);
    EXPECT_GT(dnnl, 0);
    EXPECT_NE(v[0].at("workload").get<std::string>().find("Conv"), std::string::npos) << v[0].dump();
    // The rule takes oneDNN for both convs; the probe keeps it unless generated was 10% faster.
    const bool grouped_dnnl = !(gen * 1.1 < dnnl);
    EXPECT_EQ(extern_kernels(m), 1 + (grouped_dnnl ? 1 : 0)) << v[0].dump();
    ir::Graph again = two_convs();
    compile(again, {});
    EXPECT_EQ(verdicts(cache.dir).size(), 1u) << "measured again";
}

TEST(KernelProbe, OffMeasuresNothing) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ScopedCacheDir cache("0");
    ir::Graph g = two_convs();
    CompiledModel m = compile(g, {});
    EXPECT_FALSE(fs::exists(cache.dir / "kernel_probe.jsonl"));
    EXPECT_EQ(extern_kernels(m), 2);  // the rule: oneDNN for both
}

}  // namespace
}  // namespace kiln::compiler
