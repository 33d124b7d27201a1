// The algorithm and layout of a oneDNN backward conv; conv_backward_choice.h has the rule and
// the figures behind it.
#include "runtime/conv_backward_choice.h"

#include <cstdlib>

#include "support/error.h"

namespace kiln::runtime {
namespace {

std::string env_or_auto(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string("auto");
}

bool strided(const ConvBwdGeometry& g) {
    for (int64_t s : g.strides)
        if (s > 1) return true;
    return false;
}

bool all_ones(const std::vector<int64_t>& v) {
    for (int64_t k : v)
        if (k != 1) return false;
    return true;
}

bool auto_winograd(const ConvBwdGeometry& g) {
    if (!winograd_applies(g) || g.in_channels < 32 || g.out_channels < 32) return false;
    const int64_t plane = g.out_plane[0] * g.out_plane[1];
    return plane >= (g.data ? 14 * 14 : 7 * 7);
}

ConvBwdLayout auto_layout(const ConvBwdGeometry& g) {
    if (!g.data || g.groups != 1 || g.kernel.size() != 2 || !strided(g)) return ConvBwdLayout::kAny;
    return all_ones(g.kernel) ? ConvBwdLayout::kNchw : ConvBwdLayout::kNhwc;
}

}  // namespace

bool winograd_applies(const ConvBwdGeometry& g) {
    if (g.kernel.size() != 2 || g.groups != 1) return false;
    for (size_t i = 0; i < 2; ++i)
        if (g.kernel[i] != 3 || g.strides[i] != 1 || g.dilates[i] != 0) return false;
    return true;
}

std::string layout_name(ConvBwdLayout l) {
    switch (l) {
        case ConvBwdLayout::kAny: return "any";
        case ConvBwdLayout::kNhwc: return "nhwc";
        case ConvBwdLayout::kNchw: return "nchw";
        case ConvBwdLayout::kNChw16c: return "nChw16c";
    }
    return "any";
}

namespace {

struct Switches {
    std::string algo;  // auto | direct | winograd
    bool layout_auto = true;
    ConvBwdLayout layout = ConvBwdLayout::kAny;
};

Switches read_switches() {
    Switches sw;
    sw.algo = env_or_auto("KILN_CONV_BWD_ALGO");
    KILN_CHECK(sw.algo == "auto" || sw.algo == "direct" || sw.algo == "winograd", kInvalidArgument)
        << "KILN_CONV_BWD_ALGO: expected auto, direct or winograd, got '" << sw.algo << "'";
    const std::string layout = env_or_auto("KILN_CONV_BWD_LAYOUT");
    if (layout == "auto") return sw;
    sw.layout_auto = false;
    bool known = false;
    for (ConvBwdLayout l : {ConvBwdLayout::kAny, ConvBwdLayout::kNhwc, ConvBwdLayout::kNchw, ConvBwdLayout::kNChw16c})
        if (layout == layout_name(l)) sw.layout = l, known = true;
    KILN_CHECK(known, kInvalidArgument)
        << "KILN_CONV_BWD_LAYOUT: expected auto, any, nhwc, nchw or nChw16c, got '" << layout << "'";
    return sw;
}

}  // namespace

void check_conv_backward_switches() { read_switches(); }

ConvBwdChoice choose_conv_backward(const ConvBwdGeometry& g) {
    KILN_CHECK(g.kernel.size() == g.strides.size() && g.kernel.size() == g.dilates.size() &&
                   g.kernel.size() == g.out_plane.size(),
               kInvalidModel)
        << "conv backward choice: " << g.kernel.size() << " kernel dims against " << g.strides.size() << " strides, "
        << g.dilates.size() << " dilations and " << g.out_plane.size() << " output dims";
    const Switches sw = read_switches();
    ConvBwdChoice c;
    c.winograd = sw.algo == "auto" ? auto_winograd(g) : sw.algo == "winograd" && winograd_applies(g);
    c.layout = sw.layout_auto ? auto_layout(g) : sw.layout;
    // The activation tags name 4-D layouts; Winograd runs on oneDNN's blocked ones.
    if (g.kernel.size() != 2 || c.winograd) c.layout = ConvBwdLayout::kAny;
    return c;
}

}  // namespace kiln::runtime
