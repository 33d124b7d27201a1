// The compile-time probe (compiler/kernel_probe.h): a convolution auto's rule is unsure about (a
// grouped one) is measured once, its verdict lands in kernel_probe.jsonl beside the kernel cache
// with both times, the compiled model takes the kernel the verdict names, and a second compile
// measures nothing; a convolution the rule is sure about (1x1, 64 channels, 28x28) is not
// measured; KILN_KERNEL_PROBE=0 measures nothing; a cached verdict against the rule that was not
// confirmed (a line without `rounds`, as written before confirmation) is measured again and
// confirmed, a confirmed one is taken as it is.
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
    // `tag`: a directory of its own (the probe keeps each verdict file it read in memory by path).
    explicit ScopedCacheDir(const std::string& probe, const std::string& tag = "") {
        dir = fs::temp_directory_path() / ("kiln_probe_test_" + std::to_string(::getpid()) + "_" + probe + tag);
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

void write_verdicts(const fs::path& dir, const std::vector<nlohmann::json>& lines) {
    std::ofstream out(dir / "kernel_probe.jsonl");
    for (const nlohmann::json& j : lines) out << j.dump() << "\n";
}

TEST(KernelProbe, ConfirmsACachedVerdictAgainstTheRuleBeforeTakingIt) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    std::string key, workload;
    {
        ScopedCacheDir first("1", "_key");
        ir::Graph g = two_convs();
        compile(g, {});
        std::vector<nlohmann::json> v = verdicts(first.dir);
        ASSERT_EQ(v.size(), 1u);
        EXPECT_GE(v[0].at("rounds").get<int>(), 2) << v[0].dump();
        key = v[0].at("key"), workload = v[0].at("workload");
    }
    // A verdict of the old format (no rounds) that overrides the rule (oneDNN) for the grouped
    // conv by a margin no real measurement gives: measured again, six rounds in all, and the
    // new times are real ones (minima over the cached and the new rounds).
    nlohmann::json unconfirmed = {{"key", key},       {"workload", workload}, {"generated_s", 1.0},
                                  {"dnnl_s", 1000.0}, {"choice", "generated"}};
    {
        ScopedCacheDir cache("1", "_unconfirmed");
        write_verdicts(cache.dir, {unconfirmed});
        ir::Graph g = two_convs();
        CompiledModel m = compile(g, {});
        std::vector<nlohmann::json> v = verdicts(cache.dir);
        ASSERT_EQ(v.size(), 2u) << "not measured again";
        EXPECT_EQ(v[1].at("key"), key);
        EXPECT_EQ(v[1].at("rounds").get<int>(), 6) << v[1].dump();
        const double gen = v[1].at("generated_s"), dnnl = v[1].at("dnnl_s");
        EXPECT_LT(gen, 1.0) << v[1].dump();
        EXPECT_LT(dnnl, 1000.0) << v[1].dump();
        EXPECT_EQ(extern_kernels(m), 1 + (!(gen * 1.1 < dnnl) ? 1 : 0)) << v[1].dump();
    }
    // The same verdict confirmed (six rounds) is taken as it is: the grouped conv generated.
    {
        ScopedCacheDir cache("1", "_confirmed");
        nlohmann::json confirmed = unconfirmed;
        confirmed["rounds"] = 6;
        write_verdicts(cache.dir, {confirmed});
        ir::Graph g = two_convs();
        CompiledModel m = compile(g, {});
        EXPECT_EQ(verdicts(cache.dir).size(), 1u) << "measured again";
        EXPECT_EQ(extern_kernels(m), 1);
    }
}

}  // namespace
}  // namespace kiln::compiler
