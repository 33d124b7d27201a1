// Op-harness cases: Resize and sampling ops. op_harness_test.cc runs them (all_cases()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "op_harness_refs.h"

namespace kiln::op::testing {

void add_resize_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Resize / GridSample references: direct textbook formulas per output element.
    auto fconst = [](std::vector<double> v) {
        In i{F32, {static_cast<int64_t>(v.size())}};
        i.constant = std::move(v);
        return i;
    };
    // Nearest, asymmetric + floor: src = floor(o / scale).
    auto nearest_floor_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r(out[0]);
        for (int64_t f = 0; f < r.numel(); ++f) {
            auto o = r.unravel(f);
            for (int d = 0; d < r.rank(); ++d) {
                const double s = static_cast<double>(out[0][d]) / static_cast<double>(x[0].shape[d]);
                o[d] = std::min<int64_t>(static_cast<int64_t>(std::floor(o[d] / s)), x[0].shape[d] - 1);
            }
            r.v[f] = x[0].at(o);
        }
        return Refs{r};
    };
    add("resize_nearest_asymmetric_floor", "Resize", {in(F32, {1, 2, 3, 4}), omitted(), fconst({1, 1, 2, 3})},
        {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
         {"nearest_mode", std::string("floor")}},
        nearest_floor_ref);
    add("resize_nearest_i8_sizes_axes", "Resize", {in(I8, {2, 3, 4}, -100, 100), omitted(), omitted(), constant({8, 6})},
        {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
         {"nearest_mode", std::string("floor")}, {"axes", Ints{2, 1}}},
        nearest_floor_ref);
    // Bilinear (PyTorch align_corners=False): src = (o + 0.5) * in / out - 0.5, edge-clamped taps.
    add("resize_linear_half_pixel_sizes", "Resize", {in(F32, {1, 2, 5, 4}), omitted(), omitted(), constant({1, 2, 3, 7})},
        {{"mode", std::string("linear")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            const Shape& is = x[0].shape;
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                double acc = 0;
                const double sy = (o[2] + 0.5) * is[2] / out[0][2] - 0.5, sx = (o[3] + 0.5) * is[3] / out[0][3] - 0.5;
                const double fy = std::floor(sy), fx = std::floor(sx);
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx) {
                        const double wy = dy ? sy - fy : 1 - (sy - fy), wx = dx ? sx - fx : 1 - (sx - fx);
                        const int64_t y = std::clamp<int64_t>(static_cast<int64_t>(fy) + dy, 0, is[2] - 1);
                        const int64_t xx = std::clamp<int64_t>(static_cast<int64_t>(fx) + dx, 0, is[3] - 1);
                        acc += wy * wx * x[0].at({o[0], o[1], y, xx});
                    }
                r.v[f] = acc;
            }
            return Refs{r};
        });
    // Bicubic (Keys a = -0.5), align_corners: src = o * (in-1) / (out-1), edge-clamped taps.
    add("resize_cubic_align_corners_f64", "Resize", {in(F64, {1, 1, 4, 3}), omitted(), fconst({1, 1, 2, 2})},
        {{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string("align_corners")},
         {"cubic_coeff_a", -0.5}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            auto keys = [](double t) {
                const double a = -0.5;
                t = std::abs(t);
                if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
                if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
                return 0.0;
            };
            Arr r(out[0]);
            const Shape& is = x[0].shape;
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                const double sy = o[2] * (is[2] - 1.0) / (out[0][2] - 1.0), sx = o[3] * (is[3] - 1.0) / (out[0][3] - 1.0);
                const int64_t fy = static_cast<int64_t>(std::floor(sy)), fx = static_cast<int64_t>(std::floor(sx));
                double acc = 0;
                for (int64_t y = fy - 1; y <= fy + 2; ++y)
                    for (int64_t xx = fx - 1; xx <= fx + 2; ++xx)
                        acc += keys(sy - y) * keys(sx - xx) *
                               x[0].at({0, 0, std::clamp<int64_t>(y, 0, is[2] - 1), std::clamp<int64_t>(xx, 0, is[3] - 1)});
                r.v[f] = acc;
            }
            return Refs{r};
        });
    // GridSample bilinear, 4-D, PyTorch formulation: unnormalize, then zeros / border / reflection.
    auto grid_ref = [](bool align, std::string pad) {
        return [align, pad](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            const int64_t H = x[0].shape[2], W = x[0].shape[3];
            auto coord = [&](double g, int64_t n) {
                double v = align ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
                if (pad == "border") v = std::clamp(v, 0.0, n - 1.0);
                if (pad == "reflection") {
                    const double lo = align ? 0.0 : -0.5, span = align ? n - 1.0 : double(n);
                    double a = std::abs(v - lo);
                    const double extra = std::fmod(a, span);
                    const int64_t flips = static_cast<int64_t>(std::floor(a / span));
                    v = flips % 2 == 0 ? extra + lo : span - extra + lo;
                    v = std::clamp(v, 0.0, n - 1.0);
                }
                return v;
            };
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                const double sx = coord(x[1].at({o[0], o[2], o[3], 0}), W), sy = coord(x[1].at({o[0], o[2], o[3], 1}), H);
                const double fy = std::floor(sy), fx = std::floor(sx);
                double acc = 0;
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx) {
                        const int64_t y = static_cast<int64_t>(fy) + dy, xx = static_cast<int64_t>(fx) + dx;
                        if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                        const double w = (dy ? sy - fy : 1 - (sy - fy)) * (dx ? sx - fx : 1 - (sx - fx));
                        acc += w * x[0].at({o[0], o[1], y, xx});
                    }
                r.v[f] = acc;
            }
            return Refs{r};
        };
    };
    add("gridsample_bilinear_zeros", "GridSample", {in(F32, {2, 3, 4, 5}), in(F32, {2, 3, 6, 2}, -1.3, 1.3)},
        {{"mode", std::string("linear")}, {"padding_mode", std::string("zeros")}}, grid_ref(false, "zeros"));
    add("gridsample_bilinear_border_aligned", "GridSample", {in(F32, {1, 2, 3, 4}), in(F32, {1, 5, 4, 2}, -1.5, 1.5)},
        {{"mode", std::string("bilinear")}, {"padding_mode", std::string("border")}, {"align_corners", int64_t{1}}},
        grid_ref(true, "border"));
    add("gridsample_bilinear_reflection_f64", "GridSample", {in(F64, {1, 2, 4, 3}), in(F64, {1, 4, 4, 2}, -2.5, 2.5)},
        {{"mode", std::string("linear")}, {"padding_mode", std::string("reflection")}}, grid_ref(false, "reflection"));
    // END add_resize_cases
}

// Harness cases of the quant op family (kept in their own block so families grow independently).

}  // namespace kiln::op::testing
