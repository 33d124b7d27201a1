// oneDNN's Winograd kernels (both variants; -1: not offered) against its direct conv on 3x3
// stride-1 convs, one thread: time
// (the fastest of 35 calls after 5: other processes only add time) and largest error against a float64 sum, per shape and batch.
// The figures behind dnnl_conv's winograd_shape (docs/kernels.md, "Winograd").
// Run: build/bin/kiln-bench-winograd-sweep (oneDNN on one OpenMP thread, set by the program).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

using dnnl::memory;
using tag = memory::format_tag;

struct Result {
    double us = -1, err = 0;
    std::string impl;
};

// y = relu(conv3x3(x, w)), pads 1, activations nChw16c as Kiln hands them to oneDNN.
// The kernel is oneDNN's implementation whose name contains `impl` (any: "").
Result measure(dnnl::engine& eng, dnnl::stream& s, dnnl::algorithm alg, const std::string& impl, int n, int c, int m,
               int h, const std::vector<float>& x, const std::vector<float>& w, const std::vector<double>& ref) {
    const auto f32 = memory::data_type::f32;
    const memory::desc xs({n, c, h, h}, f32, tag::nchw), ws({m, c, 3, 3}, f32, tag::oihw), ys({n, m, h, h}, f32, tag::nchw);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg,
                                      memory::desc({n, c, h, h}, f32, tag::nChw16c), memory::desc({m, c, 3, 3}, f32, tag::any),
                                      memory::desc({n, m, h, h}, f32, tag::nChw16c), {1, 1}, {1, 1}, {1, 1});
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    Result r;
    dnnl::convolution_forward::primitive_desc pd;
    try {
        pd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
    } catch (const dnnl::error&) {
        return r;  // no kernel for this shape
    }
    while (std::string(pd.impl_info_str()).find(impl) == std::string::npos)
        if (!pd.next_impl()) return r;
    r.impl = pd.impl_info_str();
    std::vector<float> y(static_cast<size_t>(n) * m * h * h);
    memory ux(xs, eng, const_cast<float*>(x.data())), uw(ws, eng, const_cast<float*>(w.data())), uy(ys, eng, y.data());
    memory px(pd.src_desc(), eng), pw(pd.weights_desc(), eng), py(pd.dst_desc(), eng);
    dnnl::reorder(ux, px).execute(s, ux, px);
    dnnl::reorder(uw, pw).execute(s, uw, pw);
    dnnl::convolution_forward conv(pd);
    std::vector<double> t;
    for (int i = 0; i < 40; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        conv.execute(s, {{DNNL_ARG_SRC, px}, {DNNL_ARG_WEIGHTS, pw}, {DNNL_ARG_DST, py}});
        s.wait();
        if (i >= 5) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    r.us = t.front();
    dnnl::reorder(py, uy).execute(s, py, uy);
    s.wait();
    for (size_t i = 0; i < ref.size(); ++i) r.err = std::max(r.err, std::fabs(y[i] - ref[i]));
    return r;
}

// The float64 reference of the first image, relu applied.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, int n, int c, int m, int h) {
    std::vector<double> y(static_cast<size_t>(n) * m * h * h);
    for (int b = 0; b < n; ++b)
        for (int o = 0; o < m; ++o)
            for (int i = 0; i < h; ++i)
                for (int j = 0; j < h; ++j) {
                    double acc = 0;
                    for (int ci = 0; ci < c; ++ci)
                        for (int u = 0; u < 3; ++u)
                            for (int v = 0; v < 3; ++v) {
                                const int r = i + u - 1, q = j + v - 1;
                                if (r >= 0 && q >= 0 && r < h && q < h)
                                    acc += double(x[((size_t(b) * c + ci) * h + r) * h + q]) * w[((size_t(o) * c + ci) * 3 + u) * 3 + v];
                            }
                    y[((size_t(b) * m + o) * h + i) * h + j] = std::max(acc, 0.0);
                }
    return y;
}

int main() {
    omp_set_num_threads(1);  // libgomp read OMP_NUM_THREADS before main
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    const int shapes[][2] = {{16, 56}, {32, 56}, {64, 56}, {128, 28}, {256, 14}, {512, 7}};
    std::printf("| batch | channels | HxW | direct us | F(2x2,3x3) us | F(4x4,3x3) us | Kiln's pick / direct | max err / max|y|: direct, F(2x2), F(4x4) |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int n : {1, 8})
        for (const auto& sh : shapes) {
            const int c = sh[0], h = sh[1];
            std::mt19937 rng(1);
            std::normal_distribution<float> g(0.f, 1.f);
            std::vector<float> x(static_cast<size_t>(n) * c * h * h), w(static_cast<size_t>(c) * c * 9);
            for (float& v : x) v = g(rng);
            for (float& v : w) v = g(rng) * std::sqrt(2.f / (9.f * c));
            const std::vector<double> ref = reference(x, w, n, c, c, h);
            double ymax = 1e-30;
            for (double v : ref) ymax = std::max(ymax, v);
            const auto wino = dnnl::algorithm::convolution_winograd;
            const Result d = measure(eng, s, dnnl::algorithm::convolution_direct, "", n, c, c, h, x, w, ref);
            const Result f2 = measure(eng, s, wino, "wino_2x3", n, c, c, h, x, w, ref);
            const Result f4 = measure(eng, s, wino, "wino_4x3", n, c, c, h, x, w, ref);
            // dnnl_conv takes F(4x4,3x3) where oneDNN offers it for outputs of 28x28 and more
            // (prefer_f4x4), else oneDNN's first offer (F(2x2,3x3) where it has one); fewer
            // than 32 channels stay direct (winograd_shape).
            const Result& winograd = f4.us > 0 && (h * h >= 28 * 28 || f2.us < 0) ? f4 : f2;
            const Result& kiln = c >= 32 ? winograd : d;
            std::printf("| %d | %d | %dx%d | %.1f | %.1f | %.1f | %.2f | %.1e, %.1e, %.1e |\n", n, c, h, h, d.us, f2.us,
                        f4.us, kiln.us > 0 ? kiln.us / d.us : -1.0, d.err / ymax, f2.err / ymax, f4.err / ymax);
        }
}
