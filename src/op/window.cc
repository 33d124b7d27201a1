// Sliding-window geometry (see window.h for the formulas).
#include "op/window.h"

#include <algorithm>

#include "ir/dim_expr.h"
#include "op/op_util.h"
#include "support/error.h"

namespace kiln::op {

int64_t WindowGeometry::padded_extent(int i, int64_t in) const {
    int64_t span = (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1;
    return std::max(in + pads_begin[i] + pads_end[i], span);
}

bool WindowGeometry::any_padding(const std::vector<int64_t>& in) const {
    for (int i = 0; i < spatial(); ++i)
        if (padded_extent(i, in[i]) != in[i]) return true;
    return false;
}

namespace {
std::vector<int64_t> per_dim(const ir::Node& n, const char* attr, size_t rank, int64_t dflt) {
    std::vector<int64_t> v = n.attr_ints(attr);
    if (v.empty()) return std::vector<int64_t>(rank, dflt);
    KILN_CHECK(v.size() == rank, kInvalidModel)
        << node_label(n) << ": attribute " << attr << " has " << v.size() << " entries, expected " << rank;
    for (int64_t x : v)
        KILN_CHECK(x >= 1, kInvalidModel) << node_label(n) << ": attribute " << attr << " entries must be >= 1, got " << x;
    return v;
}
}  // namespace

WindowGeometry window_geometry(const ir::Node& n, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                               bool ceil_mode) {
    const size_t rank = in.size();
    WindowGeometry g;
    g.kernel = kernel;
    g.strides = per_dim(n, "strides", rank, 1);
    g.dilations = per_dim(n, "dilations", rank, 1);
    g.pads_begin.assign(rank, 0);
    g.pads_end.assign(rank, 0);
    g.out.assign(rank, 0);
    std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET") {
        std::vector<int64_t> pads = n.attr_ints("pads");
        if (!pads.empty()) {
            KILN_CHECK(pads.size() == 2 * rank, kInvalidModel)
                << node_label(n) << ": attribute pads has " << pads.size() << " entries, expected " << 2 * rank;
            for (size_t i = 0; i < rank; ++i) {
                KILN_CHECK(pads[i] >= 0 && pads[i + rank] >= 0, kInvalidModel)
                    << node_label(n) << ": pads must be non-negative";
                g.pads_begin[i] = pads[i];
                g.pads_end[i] = pads[i + rank];
            }
        }
    } else {
        KILN_CHECK(auto_pad == "VALID" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", kInvalidModel)
            << node_label(n) << ": unknown auto_pad value '" << auto_pad << "'";
    }
    for (size_t i = 0; i < rank; ++i) {
        KILN_CHECK(kernel[i] >= 1, kInvalidModel) << node_label(n) << ": kernel size must be >= 1, got " << kernel[i];
        int64_t eff = (kernel[i] - 1) * g.dilations[i] + 1;
        int64_t s = g.strides[i];
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            g.out[i] = (in[i] + s - 1) / s;
            int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + eff - in[i]);
            int64_t small = total / 2;
            g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
            g.pads_end[i] = total - g.pads_begin[i];
            continue;
        }
        int64_t span = in[i] + g.pads_begin[i] + g.pads_end[i] - eff;
        KILN_CHECK(span >= 0, kInvalidModel)
            << node_label(n) << ": window of size " << eff << " (kernel " << kernel[i] << ", dilation " << g.dilations[i]
            << ") is larger than the padded input " << in[i] + g.pads_begin[i] + g.pads_end[i] << " in spatial dim " << i;
        if (ceil_mode && auto_pad == "NOTSET") {
            g.out[i] = (span + s - 1) / s + 1;
            // NOTE: a last window starting in the end padding is dropped (ONNX / PyTorch rule).
            if ((g.out[i] - 1) * s >= in[i] + g.pads_begin[i]) --g.out[i];
        } else {
            g.out[i] = span / s + 1;
        }
    }
    return g;
}

std::vector<ir::Dim> window_out_dims(const ir::Node& n, const std::vector<ir::Dim>& in,
                                     const std::vector<int64_t>& kernel, bool ceil_mode) {
    // The attributes (pads, strides, ...) do not depend on the input size except under SAME,
    // where only the output rule below is used: a large stand-in size checks them.
    constexpr int64_t kStandIn = int64_t{1} << 30;
    std::vector<int64_t> sizes;
    for (const ir::Dim& d : in) sizes.push_back(d.is_static() ? d.value : kStandIn);
    const WindowGeometry g = window_geometry(n, sizes, kernel, ceil_mode);
    const bool same = n.attr_string("auto_pad", "NOTSET").rfind("SAME", 0) == 0;
    std::vector<ir::Dim> out;
    for (size_t i = 0; i < in.size(); ++i) {
        const auto p = ir::dim_poly(in[i]);
        if (in[i].is_static() || !p) {
            out.push_back(in[i].is_static() ? ir::Dim(g.out[i]) : ir::Dim::sym("?"));
            continue;
        }
        const int64_t s = g.strides[i], ext = (kernel[i] - 1) * g.dilations[i] + 1;
        // ceil_mode rounds the window count up, less one when the last window would start past
        // the input and its begin padding; that never happens when s + pads_end <= ext (a 3x3
        // or 2x2 window with stride 2: GoogLeNet's, SqueezeNet's pools), so the count is one
        // floor expression. Otherwise it depends on the size: not symbolic.
        const bool ceil = ceil_mode && s > 1 && !same;
        if (ceil && s + g.pads_end[i] > ext) {
            out.push_back(ir::Dim::sym("?"));
            continue;
        }
        const int64_t round_up = ceil ? s - 1 : 0;
        const DimPoly o =
            same ? DimPoly::ceil_div(*p, s)
                 : DimPoly::floor_div(*p + DimPoly::constant(g.pads_begin[i] + g.pads_end[i] - ext + round_up), s) +
                       DimPoly::constant(1);
        out.push_back(ir::dim_of_poly(o).value_or(ir::Dim::sym("?")));
    }
    return out;
}

std::vector<AttrSpec> conv_window_attrs(bool with_group) {
    std::vector<AttrSpec> a = {{"auto_pad", AttrKind::kString, ir::Attr(std::string("NOTSET"))},
                               {"dilations", AttrKind::kInts, std::nullopt},
                               {"kernel_shape", AttrKind::kInts, std::nullopt},
                               {"pads", AttrKind::kInts, std::nullopt},
                               {"strides", AttrKind::kInts, std::nullopt}};
    if (with_group) a.insert(a.begin() + 2, {"group", AttrKind::kInt, ir::Attr(int64_t{1})});
    return a;
}

}  // namespace kiln::op
