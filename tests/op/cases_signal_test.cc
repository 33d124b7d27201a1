// Op-harness cases: Signal-processing and sequence-style ops. op_harness_test.cc runs them (all_cases()).
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

void add_signal_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Scalar constant inputs (window sizes, mel parameters).
    auto scalar = [](DType t, double v) {
        In i{t, {}};
        i.constant = {v};
        return i;
    };
    // Windows from their textbook definitions: M = periodic ? N : N - 1.
    auto window_ref = [](std::function<double(double, double)> w) -> RefFn {
        return [w](const std::vector<Arr>&, const ir::Node& n, const std::vector<Shape>& out) {
            Arr y(out[0]);
            const double m = static_cast<double>(n.attr_int("periodic", 1) ? out[0][0] : out[0][0] - 1);
            for (int64_t k = 0; k < y.numel(); ++k) y.v[k] = w(static_cast<double>(k), m);
            return Refs{y};
        };
    };
    const double pi = 3.14159265358979323846;
    add("hann_window_periodic", "HannWindow", {scalar(I32, 10)}, {},
        window_ref([=](double k, double m) { return std::pow(std::sin(pi * k / m), 2); }));
    add("hamming_window_symmetric_f64", "HammingWindow", {scalar(I64, 7)},
        {{"periodic", int64_t{0}}, {"output_datatype", int64_t{11}}},
        window_ref([=](double k, double m) { return 0.54347826086956522 - 0.45652173913043478 * std::cos(2 * pi * k / m); }));
    add("blackman_window_periodic", "BlackmanWindow", {scalar(I32, 12)}, {},
        window_ref([=](double k, double m) {
            return 0.42 - 0.5 * std::cos(2 * pi * k / m) + 0.08 * std::cos(4 * pi * k / m);
        }));
    // MelWeightMatrix: the spec's loops (triangle rising from bin[i] to bin[i+1], falling to bin[i+2]).
    add("mel_weight_matrix", "MelWeightMatrix",
        {scalar(I64, 6), scalar(I64, 64), scalar(I64, 16000), scalar(F32, 100), scalar(F32, 7000)}, {},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            const int64_t mels = static_cast<int64_t>(x[0].v[0]), dft = static_cast<int64_t>(x[1].v[0]);
            const double rate = x[2].v[0];
            auto mel = [](double hz) { return 2595.0f * std::log10(1.0f + static_cast<float>(hz) / 700.0f); };
            const float lo = mel(x[3].v[0]), hi = mel(x[4].v[0]);
            const float step = (hi - lo) / static_cast<float>(mels + 2);
            std::vector<int64_t> bin;
            for (int64_t k = 0; k < mels + 2; ++k) {
                const double hz = 700.0 * (std::pow(10.0, (k * static_cast<double>(step) + lo) / 2595.0) - 1.0);
                bin.push_back(static_cast<int64_t>(std::floor((dft + 1) * hz / rate)));
            }
            Arr y(out[0]);
            for (int64_t i = 0; i < mels; ++i) {
                const int64_t l = bin[i], c = bin[i + 1], h = bin[i + 2];
                if (c == l) y.v[y.ravel({c, i})] = 1;
                else
                    for (int64_t j = l; j <= c; ++j) y.v[y.ravel({j, i})] = double(j - l) / double(c - l);
                for (int64_t j = c; j < h; ++j) y.v[y.ravel({j, i})] = double(h - j) / double(h - c);
            }
            return Refs{y};
        });
    // Shrink / Swish: scalar formulas.
    auto shrink = [](double lambd, double bias) {
        return unary_ref([=](double v) { return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0; });
    };
    add("shrink_soft_f32", "Shrink", {in(F32, {3, 7}, -3, 3)}, {{"lambd", 1.5}, {"bias", 1.5}}, shrink(1.5, 1.5));
    add("shrink_hard_f64", "Shrink", {in(F64, {11})}, {{"lambd", 0.7}}, shrink(0.7, 0.0));
    add("shrink_i32", "Shrink", {in(I32, {4, 5}, -6, 6)}, {{"lambd", 2.0}, {"bias", 1.0}}, shrink(2.0, 1.0));
    add("swish_alpha", "Swish", {in(F32, {2, 9}, -6, 6)}, {{"alpha", 0.5}},
        unary_ref([](double v) { return v / (1 + std::exp(-0.5 * v)); }));
    add("swish_f16", "Swish", {in(F16, {8})}, {}, unary_ref([](double v) { return v / (1 + std::exp(-v)); }));
    // AffineGrid: base point per the spec's linspace, times theta.
    auto affine_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const bool align = n.attr_int("align_corners", 0) != 0;
        const int sd = static_cast<int>(out[0].size()) - 2;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            std::vector<double> pt;  // x (last spatial dim) first, then 1
            for (int d = sd; d >= 1; --d) {
                const double s = static_cast<double>(out[0][d]);
                pt.push_back(align ? (s == 1 ? -1.0 : -1.0 + 2.0 * o[d] / (s - 1)) : -1.0 + 1.0 / s + 2.0 * o[d] / s);
            }
            pt.push_back(1.0);
            double acc = 0;
            for (int j = 0; j <= sd; ++j) acc += x[0].at({o[0], o[sd + 1], j}) * pt[j];
            y.v[f] = acc;
        }
        return Refs{y};
    };
    add("affine_grid_2d", "AffineGrid", {in(F32, {2, 2, 3}), constant({2, 3, 4, 5})}, {}, affine_ref);
    add("affine_grid_3d_align_f64", "AffineGrid", {in(F64, {1, 3, 4}), constant({1, 1, 3, 1, 4})},
        {{"align_corners", int64_t{1}}}, affine_ref);
    // Col2Im: scatter-add of every column entry to its image position (the im2col definition).
    auto col2im_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Ints image(x[1].v.begin(), x[1].v.end()), block(x[2].v.begin(), x[2].v.end());
        const size_t sd = image.size();
        const Ints st = n.attr_ints("strides", Ints(sd, 1)), dil = n.attr_ints("dilations", Ints(sd, 1));
        const Ints pads = n.attr_ints("pads", Ints(2 * sd, 0));
        Ints nb;
        for (size_t d = 0; d < sd; ++d) nb.push_back((image[d] + pads[d] + pads[d + sd] - dil[d] * (block[d] - 1) - 1) / st[d] + 1);
        Arr y(out[0]);
        Arr kb(Shape(block.begin(), block.end())), qb(Shape(nb.begin(), nb.end()));
        const int64_t bs = kb.numel();
        for (int64_t f = 0; f < x[0].numel(); ++f) {
            const auto idx = x[0].unravel(f);
            const auto k = kb.unravel(idx[1] % bs), q = qb.unravel(idx[2]);
            std::vector<int64_t> o = {idx[0], idx[1] / bs};
            bool inside = true;
            for (size_t d = 0; d < sd; ++d) {
                const int64_t p = q[d] * st[d] - pads[d] + k[d] * dil[d];
                inside = inside && p >= 0 && p < image[d];
                o.push_back(p);
            }
            if (inside) y.v[y.ravel(o)] += x[0].v[f];
        }
        return Refs{y};
    };
    add("col2im_2d_pads_strides_dilations", "Col2Im", {in(F32, {2, 12, 9}), constant({5, 6}), constant({2, 3})},
        {{"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}, {"pads", Ints{1, 0, 0, 1}}}, col2im_ref);
    add("col2im_3d_f64", "Col2Im", {in(F64, {1, 8, 24}), constant({3, 4, 5}), constant({2, 2, 2})}, {}, col2im_ref);
    // Einsum: explicit loops over every label assignment (equation-specific reference lambdas).
    add("einsum_batch_matmul", "Einsum", {in(F32, {3, 2, 4}), in(F32, {3, 4, 5})}, {{"equation", std::string("bij, bjk -> bik")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t b = 0; b < 3; ++b)
                for (int64_t i = 0; i < 2; ++i)
                    for (int64_t k = 0; k < 5; ++k)
                        for (int64_t j = 0; j < 4; ++j) y.v[y.ravel({b, i, k})] += x[0].at({b, i, j}) * x[1].at({b, j, k});
            return Refs{y};
        });
    add("einsum_implicit_matmul_transposed", "Einsum", {in(F64, {4, 3}), in(F64, {2, 4})}, {{"equation", std::string("ji,kj")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {  // implicit output "ik"
            Arr y(out[0]);
            for (int64_t i = 0; i < 3; ++i)
                for (int64_t k = 0; k < 2; ++k)
                    for (int64_t j = 0; j < 4; ++j) y.v[y.ravel({i, k})] += x[0].at({j, i}) * x[1].at({k, j});
            return Refs{y};
        });
    add("einsum_ellipsis_diagonal", "Einsum", {in(F32, {2, 3, 4, 4})}, {{"equation", std::string("...ii->...i")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto o = y.unravel(f);
                y.v[f] = x[0].at({o[0], o[1], o[2], o[2]});
            }
            return Refs{y};
        });
    add("einsum_ellipsis_broadcast_sum", "Einsum", {in(I32, {2, 1, 3}, -5, 5), in(I32, {4, 3}, -5, 5)},
        {{"equation", std::string("...j,...j->...")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);  // [2, 4]
            for (int64_t a = 0; a < 2; ++a)
                for (int64_t b = 0; b < 4; ++b)
                    for (int64_t j = 0; j < 3; ++j) y.v[y.ravel({a, b})] += x[0].at({a, 0, j}) * x[1].at({b, j});
            return Refs{y};
        });
    // Det: Gaussian elimination with partial pivoting in double.
    auto det_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const int64_t m = x[0].shape.back();
        for (int64_t b = 0; b < y.numel(); ++b) {
            std::vector<double> a(x[0].v.begin() + b * m * m, x[0].v.begin() + (b + 1) * m * m);
            double det = 1;
            for (int64_t c = 0; c < m; ++c) {
                int64_t p = c;
                for (int64_t r = c + 1; r < m; ++r)
                    if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
                if (p != c) {
                    for (int64_t k = 0; k < m; ++k) std::swap(a[p * m + k], a[c * m + k]);
                    det = -det;
                }
                det *= a[c * m + c];
                if (a[c * m + c] == 0) break;
                for (int64_t r = c + 1; r < m; ++r) {
                    const double fct = a[r * m + c] / a[c * m + c];
                    for (int64_t k = c; k < m; ++k) a[r * m + k] -= fct * a[c * m + k];
                }
            }
            y.v[b] = det;
        }
        return Refs{y};
    };
    add("det_2x2", "Det", {in(F32, {2, 2})}, {}, det_ref);
    add("det_batch_3x3", "Det", {in(F32, {2, 3, 3, 3})}, {}, det_ref);
    add("det_4x4_f64", "Det", {in(F64, {3, 4, 4})}, {}, det_ref);
    // TensorScatter: the spec's loop, copying update rows into a copy of the cache.
    auto tensor_scatter_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y = x[0];
        const int axis = norm_axis(n.attr_int("axis", -2), x[0].rank());
        const bool circular = n.attr_string("mode", "linear") == "circular";
        const int64_t smax = x[0].shape[axis];
        for (int64_t f = 0; f < x[1].numel(); ++f) {
            auto idx = x[1].unravel(f);
            const int64_t w = x.size() > 2 && x[2].present ? static_cast<int64_t>(x[2].v[idx[0]]) : 0;
            idx[axis] += w;
            if (circular) idx[axis] = ((idx[axis] % smax) + smax) % smax;
            y.v[y.ravel(idx)] = x[1].v[f];
        }
        return Refs{y};
    };
    add("tensor_scatter_linear_default_axis", "TensorScatter", {in(F32, {2, 3, 6, 4}), in(F32, {2, 3, 2, 4}), constant({1, 4})},
        {}, tensor_scatter_ref);
    add("tensor_scatter_circular_axis1_i32", "TensorScatter", {in(I32, {3, 5, 2}, -9, 9), in(I32, {3, 3, 2}, -9, 9), constant({3, 0, 4})},
        {{"mode", std::string("circular")}, {"axis", int64_t{1}}}, tensor_scatter_ref);
    add("tensor_scatter_no_indices", "TensorScatter", {in(F64, {2, 4, 3}), in(F64, {2, 2, 3})}, {{"axis", int64_t{1}}},
        tensor_scatter_ref);
    // Upsample (nearest): out[o] = X[floor(o / scale)] per axis.
    add("upsample_nearest", "Upsample", {in(F32, {1, 2, 2, 3}), [] {
             In s{F32, {4}};
             s.constant = {1, 1, 2, 3};
             return s;
         }()},
        {},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t f = 0; f < y.numel(); ++f) {
                auto o = y.unravel(f);
                for (int d = 0; d < y.rank(); ++d) o[d] = static_cast<int64_t>(std::floor(o[d] / x[1].v[d]));
                y.v[f] = x[0].at(o);
            }
            return Refs{y};
        });
    // END add_signal_cases
}

// Harness cases of the recurrent op family (kept in their own block so families grow independently).

void add_signal2_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    auto scalar = [](double v) {
        In i{I64, {}};
        i.constant = {v};
        return i;
    };
    const double pi = 3.14159265358979323846;
    // DFT along `axis` of length L (dft_length or the axis' size; zero padding / truncation).
    auto dft_ref = [pi](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& s = x[0];
        const int rank = s.rank();
        int64_t axis = x.size() > 2 && x[2].present ? static_cast<int64_t>(x[2].v[0]) : -2;  // DFT-20 default
        if (axis < 0) axis += rank;
        const int64_t len = x.size() > 1 && x[1].present ? static_cast<int64_t>(x[1].v[0]) : s.shape[axis];
        const bool inverse = n.attr_int("inverse", 0) != 0, cplx = s.shape.back() == 2;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); f += 2) {
            auto o = y.unravel(f);
            std::complex<double> acc = 0;
            for (int64_t t = 0; t < std::min(len, s.shape[axis]); ++t) {
                auto i = o;
                i[axis] = t;
                i.back() = 0;
                std::complex<double> v(s.at(i), 0.0);
                if (cplx) {
                    i.back() = 1;
                    v.imag(s.at(i));
                }
                const double ang = (inverse ? 2.0 : -2.0) * pi * static_cast<double>(o[axis] * t) / len;
                acc += v * std::exp(std::complex<double>(0.0, ang));
            }
            if (inverse) acc /= static_cast<double>(len);
            y.v[f] = acc.real();
            y.v[f + 1] = acc.imag();
        }
        return Refs{y};
    };
    add("dft_real_axis1", "DFT", {in(F32, {2, 8, 3, 1}), omitted(), scalar(1)}, {}, dft_ref);
    add("dft_default_axis_rank4", "DFT", {in(F32, {2, 3, 5, 1})}, {}, dft_ref);
    add("dft_complex_inverse_axis_input_f64", "DFT", {in(F64, {2, 5, 2}), omitted(), scalar(-2)},
        {{"inverse", int64_t{1}}}, dft_ref);
    add("dft_onesided_zero_pad", "DFT", {in(F32, {3, 6, 1}), scalar(10), scalar(1)}, {{"onesided", int64_t{1}}},
        dft_ref);
    add("dft_truncate_axis0_f64", "DFT", {in(F64, {7, 3, 2}), scalar(5), scalar(0)}, {}, dft_ref);
    add("dft_f16_rank2", "DFT", {in(F16, {6, 1}), omitted(), scalar(0)}, {}, dft_ref);
    add("dft_large_values", "DFT", {in(F32, {1, 64, 1}, 0, 100), omitted(), scalar(1)}, {}, dft_ref);
    // STFT: frame f = samples [f * step, f * step + L), times the window, forward DFT of length L.
    auto stft_ref = [pi](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& s = x[0];
        const int64_t step = static_cast<int64_t>(x[1].v[0]);
        const bool has_window = x.size() > 2 && x[2].present;
        const int64_t len = x.size() > 3 && x[3].present ? static_cast<int64_t>(x[3].v[0])
                            : has_window                ? x[2].shape[0]
                                                        : s.shape[1];
        (void)n;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); f += 2) {
            auto o = y.unravel(f);
            std::complex<double> acc = 0;
            for (int64_t t = 0; t < len; ++t) {
                const int64_t p = o[1] * step + t;
                std::complex<double> v(s.at({o[0], p, 0}), s.shape[2] == 2 ? s.at({o[0], p, 1}) : 0.0);
                if (has_window) v *= x[2].v[t];
                acc += v * std::exp(std::complex<double>(0.0, -2.0 * pi * static_cast<double>(o[2] * t) / len));
            }
            y.v[f] = acc.real();
            y.v[f + 1] = acc.imag();
        }
        return Refs{y};
    };
    add("stft_window_onesided", "STFT", {in(F32, {2, 32, 1}), scalar(4), in(F32, {8}, 0, 1)}, {}, stft_ref);
    add("stft_complex_twosided_f64", "STFT", {in(F64, {1, 20, 2}), scalar(3), omitted(), scalar(6)},
        {{"onesided", int64_t{0}}}, stft_ref);
    // RoiAlign from the spec loops.
    auto roi_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr &xs = x[0], &rois = x[1], &bi = x[2];
        const int64_t H = xs.shape[2], W = xs.shape[3], C = xs.shape[1];
        const int64_t oh = out[0][2], ow = out[0][3];
        const bool half = n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
        const bool is_max = n.attr_string("mode", "avg") == "max";
        const int64_t sr = n.attr_int("sampling_ratio", 0);
        const double scale = n.attr_float("spatial_scale", 1.0), off = half ? 0.5 : 0.0;
        Arr y(out[0]);
        for (int64_t r = 0; r < out[0][0]; ++r) {
            const double x1 = rois.at({r, 0}) * scale - off, y1 = rois.at({r, 1}) * scale - off;
            const double x2 = rois.at({r, 2}) * scale - off, y2 = rois.at({r, 3}) * scale - off;
            double rw = x2 - x1, rh = y2 - y1;
            if (!half) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
            const double bh = rh / oh, bw = rw / ow;
            const int64_t gh = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rh / oh));
            const int64_t gw = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rw / ow));
            const int64_t b = static_cast<int64_t>(bi.v[r]);
            for (int64_t ch = 0; ch < C; ++ch)
                for (int64_t ph = 0; ph < oh; ++ph)
                    for (int64_t pw = 0; pw < ow; ++pw) {
                        double acc = 0;
                        bool first = true;
                        for (int64_t iy = 0; iy < gh; ++iy)
                            for (int64_t ix = 0; ix < gw; ++ix) {
                                double yy = y1 + ph * bh + (iy + 0.5) * bh / gh;
                                double xx = x1 + pw * bw + (ix + 0.5) * bw / gw;
                                double val = 0;
                                if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
                                    yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                                    int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
                                    if (yl >= H - 1) yh = yl = H - 1, yy = static_cast<double>(yl);
                                    else yh = yl + 1;
                                    if (xl >= W - 1) xh = xl = W - 1, xx = static_cast<double>(xl);
                                    else xh = xl + 1;
                                    const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
                                    const double w[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
                                    const double v[4] = {xs.at({b, ch, yl, xl}), xs.at({b, ch, yl, xh}),
                                                         xs.at({b, ch, yh, xl}), xs.at({b, ch, yh, xh})};
                                    if (is_max) {
                                        val = w[0] * v[0];
                                        for (int k = 1; k < 4; ++k) val = std::max(val, w[k] * v[k]);
                                    } else {
                                        for (int k = 0; k < 4; ++k) val += w[k] * v[k];
                                    }
                                }
                                acc = is_max ? (first ? val : std::max(acc, val)) : acc + val;
                                first = false;
                            }
                        if (!is_max) acc /= static_cast<double>(std::max<int64_t>(gh * gw, 1));
                        y.v[y.ravel({r, ch, ph, pw})] = acc;
                    }
        }
        return Refs{y};
    };
    auto roi_attrs = [](const char* ctm, const char* mode, int64_t oh, int64_t ow, int64_t sr, double scale) {
        return AttrMap{{"coordinate_transformation_mode", std::string(ctm)}, {"mode", std::string(mode)},
                       {"output_height", oh}, {"output_width", ow}, {"sampling_ratio", sr}, {"spatial_scale", scale}};
    };
    add("roi_align_avg_sr2_half_pixel", "RoiAlign", {in(F32, {2, 3, 8, 8}), in(F32, {4, 4}, 0, 7), in(I64, {4}, 0, 1)},
        roi_attrs("half_pixel", "avg", 3, 3, 2, 1.0), roi_ref);
    add("roi_align_max_sr2_output_half_pixel", "RoiAlign",
        {in(F32, {1, 2, 8, 8}), in(F32, {3, 4}, 0, 15), in(I64, {3}, 0, 0)},
        roi_attrs("output_half_pixel", "max", 2, 3, 2, 0.5), roi_ref);
    // Adaptive grids with runtime ROIs far larger than the image: the windowed static grid.
    add("roi_align_avg_adaptive_runtime_rois", "RoiAlign",
        {in(F64, {1, 2, 6, 6}), in(F64, {6, 4}, -30, 30), in(I64, {6}, 0, 0)},
        roi_attrs("half_pixel", "avg", 1, 2, 0, 1.0), roi_ref);
    add("roi_align_max_adaptive_runtime_rois_negative", "RoiAlign",
        {in(F64, {2, 1, 5, 7}, -2, -0.5), in(F64, {8, 4}, -25, 25), in(I64, {8}, 0, 1)},
        roi_attrs("output_half_pixel", "max", 1, 1, 0, 1.0), roi_ref);
    add("roi_align_max_adaptive_runtime_rois", "RoiAlign",
        {in(F32, {1, 3, 6, 6}), in(F32, {5, 4}, -3, 9), in(I64, {5}, 0, 0)},
        roi_attrs("half_pixel", "max", 2, 2, 0, 1.0), roi_ref);
    In const_rois{F32, {3, 4}};
    const_rois.constant = {0, 0, 5, 5, 1, 2, 4, 7, 6, 1, 2, 3};
    add("roi_align_avg_adaptive_constant_rois", "RoiAlign", {in(F32, {1, 2, 8, 8}), const_rois, in(I64, {3}, 0, 0)},
        roi_attrs("half_pixel", "avg", 2, 2, 0, 1.0), roi_ref);
    // END add_signal2_cases
}

}  // namespace kiln::op::testing
