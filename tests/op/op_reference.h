// Independent naive reference implementations (double precision, straight from the ONNX spec
// formulas) used by the op harness. Nothing here calls into Kiln's op layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "ir/graph.h"

namespace kiln::op::testing {

/// A dense row-major array of doubles.
struct Arr {
    Shape shape;
    std::vector<double> v;
    bool present = true;
    Arr() = default;
    explicit Arr(Shape s) : shape(std::move(s)), v(shape_numel(shape), 0.0) {}
    int64_t numel() const { return static_cast<int64_t>(v.size()); }
    int rank() const { return static_cast<int>(shape.size()); }
    int64_t ravel(const std::vector<int64_t>& idx) const {
        int64_t f = 0;
        for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
        return f;
    }
    std::vector<int64_t> unravel(int64_t f) const {
        std::vector<int64_t> idx(shape.size());
        for (size_t i = shape.size(); i-- > 0;) {
            idx[i] = f % shape[i];
            f /= shape[i];
        }
        return idx;
    }
    double at(const std::vector<int64_t>& idx) const { return v[ravel(idx)]; }
    /// Numpy broadcast read: right-aligned, size-1 dims read index 0.
    double bread(const std::vector<int64_t>& out_idx) const {
        std::vector<int64_t> idx(shape.size());
        size_t off = out_idx.size() - shape.size();
        for (size_t i = 0; i < shape.size(); ++i) idx[i] = shape[i] == 1 ? 0 : out_idx[off + i];
        return at(idx);
    }
};

using Refs = std::vector<Arr>;

inline Arr map_binary(const Arr& a, const Arr& b, const Shape& out, const std::function<double(double, double)>& f) {
    Arr r(out);
    for (int64_t i = 0; i < r.numel(); ++i) {
        auto idx = r.unravel(i);
        r.v[i] = f(a.bread(idx), b.bread(idx));
    }
    return r;
}

inline Arr map_unary(const Arr& a, const std::function<double(double)>& f) {
    Arr r(a.shape);
    for (int64_t i = 0; i < r.numel(); ++i) r.v[i] = f(a.v[i]);
    return r;
}

/// Begin pads for one spatial dim under the node's auto_pad / pads.
inline void ref_pads(const ir::Node& n, size_t d, size_t nsp, int64_t in, int64_t k, int64_t s, int64_t dil,
                     int64_t out, int64_t* pb, int64_t* pe) {
    std::string ap = n.attr_string("auto_pad", "NOTSET");
    if (ap == "VALID") {
        *pb = *pe = 0;
    } else if (ap == "NOTSET") {
        auto pads = n.attr_ints("pads");
        *pb = pads.empty() ? 0 : pads[d];
        *pe = pads.empty() ? 0 : pads[d + nsp];
    } else {
        int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * dil + 1 - in);
        *pb = ap == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
        *pe = total - *pb;
    }
}

struct RefWindow {
    std::vector<int64_t> in, k, s, d, pb, pe, out;
};

inline RefWindow ref_window(const ir::Node& n, const Shape& x, const std::vector<int64_t>& kernel, const Shape& y) {
    RefWindow w;
    size_t nsp = x.size() - 2;
    auto strides = n.attr_ints("strides"), dil = n.attr_ints("dilations");
    for (size_t i = 0; i < nsp; ++i) {
        w.in.push_back(x[2 + i]);
        w.k.push_back(kernel[i]);
        w.s.push_back(strides.empty() ? 1 : strides[i]);
        w.d.push_back(dil.empty() ? 1 : dil[i]);
        w.out.push_back(y[2 + i]);
        int64_t pb, pe;
        ref_pads(n, i, nsp, w.in[i], w.k[i], w.s[i], w.d[i], w.out[i], &pb, &pe);
        w.pb.push_back(pb);
        w.pe.push_back(pe);
    }
    return w;
}

// Iterates every kernel offset (row-major).
inline std::vector<std::vector<int64_t>> kernel_offsets(const std::vector<int64_t>& k) {
    std::vector<std::vector<int64_t>> all;
    Arr shape(Shape(k.begin(), k.end()));
    for (int64_t f = 0; f < shape.numel(); ++f) all.push_back(shape.unravel(f));
    return all;
}

inline Arr ref_conv(const Arr& x, const Arr& w, const Arr* b, const ir::Node& n, const Shape& out) {
    Arr y(out);
    std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    RefWindow g = ref_window(n, x.shape, kernel, out);
    int64_t group = n.attr_int("group", 1), M = w.shape[0], cg = w.shape[1];
    auto offs = kernel_offsets(kernel);
    for (int64_t f = 0; f < y.numel(); ++f) {
        auto o = y.unravel(f);
        int64_t m = o[1], grp = m / (M / group);
        double acc = b ? b->v[m] : 0.0;
        for (int64_t c = 0; c < cg; ++c)
            for (const auto& kk : offs) {
                std::vector<int64_t> xi = {o[0], grp * cg + c}, wi = {m, c};
                bool ok = true;
                for (size_t i = 0; i < kk.size(); ++i) {
                    int64_t p = o[2 + i] * g.s[i] - g.pb[i] + kk[i] * g.d[i];
                    ok = ok && p >= 0 && p < g.in[i];
                    xi.push_back(p);
                    wi.push_back(kk[i]);
                }
                if (ok) acc += x.at(xi) * w.at(wi);
            }
        y.v[f] = acc;
    }
    return y;
}

/// MaxPool (+ Indices) and AveragePool per the ONNX reference.
inline Refs ref_pool(const Arr& x, const ir::Node& n, const Shape& out, bool is_max) {
    auto kernel = n.attr_ints("kernel_shape");
    RefWindow g = ref_window(n, x.shape, kernel, out);
    bool include_pad = n.attr_int("count_include_pad", 0) != 0;
    bool col_major = n.attr_int("storage_order", 0) != 0;
    Arr y(out), ind(out);
    auto offs = kernel_offsets(kernel);
    int64_t spatial = 1;
    for (int64_t e : g.in) spatial *= e;
    for (int64_t f = 0; f < y.numel(); ++f) {
        auto o = y.unravel(f);
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t best_idx = -1, count = 0;
        for (const auto& kk : offs) {
            std::vector<int64_t> xi = {o[0], o[1]};
            bool inside = true, in_padded = true;
            for (size_t i = 0; i < kk.size(); ++i) {
                int64_t p = o[2 + i] * g.s[i] - g.pb[i] + kk[i] * g.d[i];
                inside = inside && p >= 0 && p < g.in[i];
                in_padded = in_padded && p >= -g.pb[i] && p < g.in[i] + g.pe[i];
                xi.push_back(p);
            }
            if (include_pad ? in_padded : inside) ++count;
            if (!inside) continue;
            double v = x.at(xi);
            sum += v;
            if (v > best) {
                best = v;
                int64_t sflat = 0, stride = 1;
                for (size_t i = 0; i < kk.size(); ++i) {
                    if (col_major) {
                        sflat += xi[2 + i] * stride;
                        stride *= g.in[i];
                    } else {
                        sflat = sflat * g.in[i] + xi[2 + i];
                    }
                }
                best_idx = (o[0] * x.shape[1] + o[1]) * spatial + sflat;
            }
        }
        y.v[f] = is_max ? best : sum / count;
        ind.v[f] = static_cast<double>(best_idx);
    }
    return is_max ? Refs{y, ind} : Refs{y};
}

inline Arr ref_matmul(const Arr& a, const Arr& b, const Shape& out) {
    Shape as = a.shape, bs = b.shape;
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    size_t nb = std::max(ab.size(), bb.size());
    Shape batch(nb);
    for (size_t i = 0; i < nb; ++i) {
        int64_t da = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
        int64_t db = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
        batch[i] = std::max(da, db);
    }
    Arr a2(as), b2(bs);
    a2.v = a.v;
    b2.v = b.v;
    Shape full = batch;
    full.push_back(M);
    full.push_back(N);
    Arr y(full);
    for (int64_t f = 0; f < y.numel(); ++f) {
        auto idx = y.unravel(f);
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
            auto ai = idx, bi = idx;
            ai[nb + 1] = k;
            bi[nb] = k;
            acc += a2.bread(ai) * b2.bread(bi);
        }
        y.v[f] = acc;
    }
    y.shape = out;  // the removed 1-D dims have size 1: same flat order
    return y;
}

}  // namespace kiln::op::testing
