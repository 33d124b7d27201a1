// kernels=auto reads the thread count the model will run on (compiler/compile.h extern_choice):
// a blocked conv of one image whose oneDNN split (runtime/extern_split.h) would keep fewer than
// two thirds of the threads busy stays generated. Fed the two machines Kiln was measured on: the
// 2-thread development machine (AMD EPYC, Zen 4) and a 16-core Xeon (AVX-512), where ResNet-50's
// 64-channel 3x3 convs on 16 threads ran on one oneDNN thread (0.8 ms at 4 threads, 2.1 at 16).
// The rule is asked directly on the partitioned graph (no kernel is compiled).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "compiler/compile.h"
#include "compiler/lower_group.h"
#include "ir/graph.h"
#include "runtime/extern_kernel.h"

namespace kiln::compiler {
namespace {

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

// x [1,C,H,H] -> 3x3 conv C -> M (pads 1) -> Relu -> 1x1 conv M -> 512.
ir::Graph convs(int64_t c, int64_t m, int64_t h) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, c, h, h}));
    ir::Value* w1 = g.add_constant("w1", weights({m, c, 3, 3}, 1));
    ir::Value* w2 = g.add_constant("w2", weights({512, m, 1, 1}, 2));
    ir::Value* y = g.add_node("Conv", {x, w1}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
                              {f32({1, m, h, h})}, {"y"}, "conv3x3")
                       ->output(0);
    ir::Value* r = g.add_node("Relu", {y}, {}, {f32({1, m, h, h})}, {"r"}, "relu")->output(0);
    ir::Value* z = g.add_node("Conv", {r, w2}, {{"kernel_shape", Ints{1, 1}}}, {f32({1, 512, h, h})}, {"z"}, "conv1x1")
                       ->output(0);
    g.add_output(z);
    return g;
}

// MobileNetV2's block: x [1,32,56,56] -> 1x1 conv 32 -> 64 -> Clip(0, 6) -> depthwise 3x3 (64
// groups) -> 1x1 conv 64 -> 32.
ir::Graph depthwise_block() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, 32, 56, 56}));
    ir::Value* w1 = g.add_constant("w1", weights({64, 32, 1, 1}, 1));
    ir::Value* wd = g.add_constant("wd", weights({64, 1, 3, 3}, 2));
    ir::Value* w2 = g.add_constant("w2", weights({32, 64, 1, 1}, 3));
    Tensor lo(DType::kFloat32, {}), hi(DType::kFloat32, {});
    lo.data_as<float>()[0] = 0;
    hi.data_as<float>()[0] = 6;
    ir::Value* vlo = g.add_constant("lo", lo);
    ir::Value* vhi = g.add_constant("hi", hi);
    ir::Value* a = g.add_node("Conv", {x, w1}, {{"kernel_shape", Ints{1, 1}}}, {f32({1, 64, 56, 56})}, {"a"}, "conv_expand")
                       ->output(0);
    ir::Value* ac = g.add_node("Clip", {a, vlo, vhi}, {}, {f32({1, 64, 56, 56})}, {"ac"}, "clip")->output(0);
    ir::Value* d = g.add_node("Conv", {ac, wd},
                              {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{64}}},
                              {f32({1, 64, 56, 56})}, {"d"}, "conv_dw")
                       ->output(0);
    ir::Value* z = g.add_node("Conv", {d, w2}, {{"kernel_shape", Ints{1, 1}}}, {f32({1, 32, 56, 56})}, {"z"}, "conv_project")
                       ->output(0);
    g.add_output(z);
    return g;
}

/// The extern kernel auto gives each conv unit (by the unit's first node's name), at `threads`.
std::map<std::string, std::string> choices(ir::Graph g, int threads) {
    CompileOptions opts;
    opts.intra_op_threads = threads;
    optimize_graph(g, opts);
    std::map<std::string, std::string> out;
    for (const KernelUnit& unit : partition_kernels(g)) {
        const std::string& name = unit.nodes.front()->name();
        if (name.find("conv") == std::string::npos) continue;
        auto c = extern_choice(unit, KernelSource::kAuto, {}, threads);
        out[name] = c ? c->name : "generated";
    }
    return out;
}

struct ProbeOff {
    ProbeOff() { ::setenv("KILN_KERNEL_PROBE", "0", 1); }  // the rule alone
    ~ProbeOff() { ::unsetenv("KILN_KERNEL_PROBE"); }
};

TEST(KernelChoiceThreads, SixtyFourChannelConvIsOneDnnOnTwoThreadsAndGeneratedOnSixteen) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ProbeOff probe_off;
    const auto two = choices(convs(64, 64, 56), 2), sixteen = choices(convs(64, 64, 56), 16);
    ASSERT_EQ(two.size(), 2u);
    ASSERT_EQ(sixteen.size(), 2u);
    // 2 threads (the Zen 4 machine): both convs keep oneDNN, whose 2 parts fill both threads.
    EXPECT_EQ(two.at("conv3x3"), "dnnl_conv");
    EXPECT_EQ(two.at("conv1x1"), "dnnl_conv");
    // 16 threads (the Xeon): 64 output channels make 4 oneDNN parts, 12 threads idle: generated.
    // 512 output channels make 16 parts: oneDNN still.
    EXPECT_EQ(sixteen.at("conv3x3"), "generated");
    EXPECT_EQ(sixteen.at("conv1x1"), "dnnl_conv");
    // 4 threads: 4 parts fill them.
    EXPECT_EQ(choices(convs(64, 64, 56), 4).at("conv3x3"), "dnnl_conv");
}

/// Sets KILN_CONV_WINOGRAD for the scope (oneDNN's direct conv with "0").
struct WinogradSwitch {
    explicit WinogradSwitch(const char* v) { ::setenv("KILN_CONV_WINOGRAD", v, 1); }
    ~WinogradSwitch() { ::unsetenv("KILN_CONV_WINOGRAD"); }
};

TEST(KernelChoiceThreads, GeneratedBelowTwoThirdsOfTheThreadsInOneDnnParts) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ProbeOff probe_off;
    WinogradSwitch direct("0");
    // oneDNN's direct conv's edge per busy thread is ~1.5x (measured on the Xeon): generated
    // below threads / 1.5.
    EXPECT_EQ(choices(convs(64, 128, 28), 16).at("conv3x3"), "generated");  // 8 parts of 16
    EXPECT_EQ(choices(convs(64, 160, 28), 16).at("conv3x3"), "generated");  // 10
    EXPECT_EQ(choices(convs(64, 176, 28), 16).at("conv3x3"), "dnnl_conv");  // 11
    EXPECT_EQ(choices(convs(64, 64, 28), 8).at("conv3x3"), "generated");    // 4 of 8
    EXPECT_EQ(choices(convs(64, 96, 28), 8).at("conv3x3"), "dnnl_conv");    // 6 of 8
}

TEST(KernelChoiceThreads, WinogradPartsAreTakenAsThreeDirectOnes) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ProbeOff probe_off;
    const std::string impl = runtime::dnnl_implementation(
        "dnnl_conv", "x=0;w=1;y=2;wei=oihw;src=1,64,28,28;dst=1,128,28,28;kernel=3,3;strides=1,1;dilations=1,1;"
                     "pads_begin=1,1;pads_end=1,1;plan_threads=16");
    if (impl.find("wino") == std::string::npos) GTEST_SKIP() << "no Winograd kernel on this machine: " << impl;
    // Generated below threads / 3 Winograd parts (compile.cc dnnl_leaves_threads_idle).
    EXPECT_EQ(choices(convs(64, 128, 28), 16).at("conv3x3"), "dnnl_conv");  // 8 parts of 16
    EXPECT_EQ(choices(convs(64, 96, 28), 16).at("conv3x3"), "dnnl_conv");   // 6
    EXPECT_EQ(choices(convs(64, 80, 28), 16).at("conv3x3"), "generated");   // 5
    EXPECT_EQ(choices(convs(64, 64, 28), 8).at("conv3x3"), "dnnl_conv");    // 4 of 8
    // One image of 7x7 outputs: Winograd, where the direct conv left it to the generated kernel.
    EXPECT_EQ(choices(convs(512, 512, 7), 2).at("conv3x3"), "dnnl_conv");
    WinogradSwitch direct("0");
    EXPECT_EQ(choices(convs(512, 512, 7), 2).at("conv3x3"), "generated");
}

TEST(KernelChoiceThreads, MobileNetBlockKeepsOneDnnWhereTheGeneratedKernelWasSlower) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    ProbeOff probe_off;
    const auto two = choices(depthwise_block(), 2), sixteen = choices(depthwise_block(), 16);
    ASSERT_EQ(two.size(), 3u);
    for (const auto& [name, kind] : two) EXPECT_EQ(kind, "dnnl_conv") << name << " on 2 threads";
    ASSERT_EQ(sixteen.size(), 3u);
    // The projection (2 parts, no epilogue): generated. The expand conv's Clip is a second pass
    // in the generated kernel, and the generated depthwise conv was 3.5x slower on the Xeon:
    // both stay oneDNN.
    EXPECT_EQ(sixteen.at("conv_project"), "generated");
    EXPECT_EQ(sixteen.at("conv_expand"), "dnnl_conv");
    EXPECT_EQ(sixteen.at("conv_dw"), "dnnl_conv");
}

}  // namespace
}  // namespace kiln::compiler
