// choose_conv_backward (runtime/conv_backward_choice.h): the algorithm and activation layout
// of each of ResNet-18's backward convs (batch 16, 112x112), the environment switches, a bad
// switch value as an error naming the variable, and (with oneDNN) that the kernel really runs
// the chosen Winograd implementation, falling back to direct where oneDNN has none.
#include "runtime/conv_backward_choice.h"

#include <gtest/gtest.h>

#include <string>

#include "../scoped_env.h"
#include "kiln/error.h"
#include "runtime/dnnl_conv_backward.h"
#include "runtime/extern_kernel.h"

namespace kiln::runtime {
namespace {

using kiln::testing::ScopedEnv;

ConvBwdGeometry geo(bool data, int64_t c, int64_t m, int64_t k, int64_t stride, int64_t out) {
    return {data, c, m, 1, {k, k}, {stride, stride}, {0, 0}, {out, out}};
}

TEST(ConvBackwardChoice, ResNet18Layers) {
    ScopedEnv algo("KILN_CONV_BWD_ALGO", nullptr), layout("KILN_CONV_BWD_LAYOUT", nullptr);
    struct Want {
        ConvBwdGeometry g;
        bool winograd;
        ConvBwdLayout layout;
    } cases[] = {
        {geo(true, 64, 64, 3, 1, 28), true, ConvBwdLayout::kAny},     // layer1: Winograd both ways
        {geo(false, 64, 64, 3, 1, 28), true, ConvBwdLayout::kAny},
        {geo(true, 128, 128, 3, 1, 14), true, ConvBwdLayout::kAny},   // layer2
        {geo(false, 128, 128, 3, 1, 14), true, ConvBwdLayout::kAny},
        {geo(true, 256, 256, 3, 1, 7), false, ConvBwdLayout::kAny},   // layer3: data direct
        {geo(false, 256, 256, 3, 1, 7), true, ConvBwdLayout::kAny},
        {geo(true, 512, 512, 3, 1, 4), false, ConvBwdLayout::kAny},   // layer4: direct
        {geo(true, 128, 256, 3, 2, 7), false, ConvBwdLayout::kNhwc},  // strided 3x3 data: NHWC
        {geo(false, 128, 256, 3, 2, 7), false, ConvBwdLayout::kAny},  // its weights: oneDNN's pick
        {geo(true, 128, 256, 1, 2, 7), false, ConvBwdLayout::kNchw},  // strided 1x1 data: NCHW
        {geo(false, 3, 64, 7, 2, 56), false, ConvBwdLayout::kAny},    // the stem
        {geo(true, 8, 16, 3, 1, 8), false, ConvBwdLayout::kAny},      // the digits CNN: few channels
    };
    for (const Want& w : cases) {
        SCOPED_TRACE(std::string(w.g.data ? "data" : "weights") + " C" + std::to_string(w.g.in_channels) + " M" +
                     std::to_string(w.g.out_channels) + " k" + std::to_string(w.g.kernel[0]) + " s" +
                     std::to_string(w.g.strides[0]) + " out " + std::to_string(w.g.out_plane[0]));
        const ConvBwdChoice c = choose_conv_backward(w.g);
        EXPECT_EQ(c.winograd, w.winograd);
        EXPECT_EQ(layout_name(c.layout), layout_name(w.layout));
    }
    ConvBwdGeometry grouped = geo(true, 64, 64, 3, 1, 28);
    grouped.groups = 2;
    EXPECT_FALSE(winograd_applies(grouped));
    ConvBwdGeometry dilated = geo(false, 64, 64, 3, 1, 28);
    dilated.dilates = {1, 1};
    EXPECT_FALSE(choose_conv_backward(dilated).winograd);
}

TEST(ConvBackwardChoice, EnvironmentForcesAndRejects) {
    {
        ScopedEnv algo("KILN_CONV_BWD_ALGO", "direct"), layout("KILN_CONV_BWD_LAYOUT", "nChw16c");
        const ConvBwdChoice c = choose_conv_backward(geo(true, 64, 64, 3, 1, 28));
        EXPECT_FALSE(c.winograd);
        EXPECT_EQ(layout_name(c.layout), "nChw16c");
    }
    {
        ScopedEnv algo("KILN_CONV_BWD_ALGO", "winograd"), layout("KILN_CONV_BWD_LAYOUT", nullptr);
        EXPECT_TRUE(choose_conv_backward(geo(true, 8, 16, 3, 1, 4)).winograd) << "forced below the measured rule";
        EXPECT_FALSE(choose_conv_backward(geo(true, 64, 128, 3, 2, 14)).winograd) << "stride 2 has no Winograd";
    }
    {
        ScopedEnv algo("KILN_CONV_BWD_ALGO", "fast");
        try {
            choose_conv_backward(geo(true, 64, 64, 3, 1, 28));
            ADD_FAILURE() << "a bad KILN_CONV_BWD_ALGO was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            EXPECT_NE(std::string(e.what()).find("KILN_CONV_BWD_ALGO"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
        }
    }
    ScopedEnv layout("KILN_CONV_BWD_LAYOUT", "nhwc16");
    EXPECT_THROW(choose_conv_backward(geo(true, 64, 64, 3, 1, 28)), Error);
    ConvBwdGeometry bad = geo(true, 64, 64, 3, 1, 28);
    bad.strides = {1};
    EXPECT_THROW(choose_conv_backward(bad), Error);
}

#if KILN_HAVE_DNNL
std::string impl(const std::string& kind, const std::string& src, const std::string& wei, const std::string& dst,
                 const std::string& strides, const std::string& pads) {
    const std::string params = "kind=" + kind + ";src=" + src + ";wei=" + wei + ";dst=" + dst +
                               ";groups=1;strides=" + strides + ";dilates=0,0;pad_l=" + pads + ";pad_r=" + pads +
                               (kind == "data" ? ";dy_arg=0;w_arg=1" : ";x_arg=0;dy_arg=1") + ";out_arg=2";
    return dnnl_conv_backward_implementation(ExternParams(params));
}

TEST(ConvBackwardChoice, KernelRunsTheChoice) {
    ScopedEnv algo("KILN_CONV_BWD_ALGO", nullptr), layout("KILN_CONV_BWD_LAYOUT", nullptr);
    for (const char* kind : {"data", "weights"}) {
        SCOPED_TRACE(kind);
        const std::string wino = impl(kind, "16,64,28,28", "64,64,3,3", "16,64,28,28", "1,1", "1,1");
        EXPECT_NE(wino.find("wino"), std::string::npos) << wino;
        ScopedEnv direct("KILN_CONV_BWD_ALGO", "direct");
        const std::string jit = impl(kind, "16,64,28,28", "64,64,3,3", "16,64,28,28", "1,1", "1,1");
        EXPECT_EQ(jit.find("wino"), std::string::npos) << jit;
        EXPECT_FALSE(jit.empty());
    }
    {  // a typo in a switch stops the compile instead of reading as "oneDNN rejects the conv"
        ScopedEnv typo("KILN_CONV_BWD_LAYOUT", "NHWC");
        try {
            impl("data", "16,64,28,28", "64,64,3,3", "16,64,28,28", "1,1", "1,1");
            ADD_FAILURE() << "a bad KILN_CONV_BWD_LAYOUT was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            EXPECT_NE(std::string(e.what()).find("KILN_CONV_BWD_LAYOUT"), std::string::npos) << e.what();
        }
    }
    // A forced layout oneDNN has only its reference kernel for (the stem's weight gradient, a
    // 3-channel input in 16-channel blocks): the kernel falls back to oneDNN's own pick.
    ScopedEnv nchw16("KILN_CONV_BWD_LAYOUT", "nChw16c");
    const std::string stem = impl("weights", "2,3,22,22", "16,3,7,7", "2,16,11,11", "2,2", "3,3");
    EXPECT_FALSE(stem.empty());
    EXPECT_EQ(stem.rfind("ref", 0), std::string::npos) << stem;
}
#endif

}  // namespace
}  // namespace kiln::runtime
