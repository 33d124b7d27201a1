// The op harness's shared naive references (op_harness_test.cc and the case files
// cases_*_test.cc): ONNX formulas written out in double, as RefFn builders.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "op_harness_cases.h"
#include "op_reference.h"

namespace kiln::op::testing {

using ir::AttrMap;
using Ints = std::vector<int64_t>;

constexpr DType F32 = DType::kFloat32, F64 = DType::kFloat64, F16 = DType::kFloat16, BF16 = DType::kBFloat16;
constexpr DType I8 = DType::kInt8, I16 = DType::kInt16, I32 = DType::kInt32, I64 = DType::kInt64;
constexpr DType U8 = DType::kUInt8, U16 = DType::kUInt16, U32 = DType::kUInt32, U64 = DType::kUInt64;

inline RefFn binary_ref(std::function<double(double, double)> f) {
    return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{map_binary(x[0], x[1], out[0], f)};
    };
}
inline RefFn unary_ref(std::function<double(double)> f) {
    return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>&) { return Refs{map_unary(x[0], f)}; };
}
inline RefFn copy_ref() {  // Flatten / Reshape: same row-major data
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r = x[0];
        r.shape = out[0];
        return Refs{r};
    };
}
inline RefFn clip_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>&) {
        Arr r = x[0];
        for (double& v : r.v) {
            if (x.size() > 1 && x[1].present) v = std::max(v, x[1].v[0]);
            if (x.size() > 2 && x[2].present) v = std::min(v, x[2].v[0]);
        }
        return Refs{r};
    };
}
inline RefFn conv_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        return Refs{ref_conv(x[0], x[1], x.size() > 2 ? &x[2] : nullptr, n, out[0])};
    };
}
inline RefFn pool_ref(bool is_max) {
    return [is_max](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Refs r = ref_pool(x[0], n, out[0], is_max);
        r.resize(out.size());
        return r;
    };
}
inline RefFn gap_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        int64_t per = x[0].numel() / y.numel();
        for (int64_t i = 0; i < y.numel(); ++i) {
            double s = 0;
            for (int64_t k = 0; k < per; ++k) s += x[0].v[i * per + k];
            y.v[i] = s / per;
        }
        return Refs{y};
    };
}
inline RefFn bn_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        double eps = n.attr_float("epsilon", 1e-5);
        Arr y(x[0].shape);
        for (int64_t f = 0; f < y.numel(); ++f) {
            int64_t c = x[0].unravel(f)[1];
            y.v[f] = (x[0].v[f] - x[3].v[c]) / std::sqrt(x[4].v[c] + eps) * x[1].v[c] + x[2].v[c];
        }
        return Refs{y};
    };
}
inline RefFn gemm_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
        double alpha = n.attr_float("alpha", 1), beta = n.attr_float("beta", 1);
        Arr y(out[0]);
        int64_t K = ta ? x[0].shape[0] : x[0].shape[1];
        for (int64_t i = 0; i < out[0][0]; ++i)
            for (int64_t j = 0; j < out[0][1]; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += (ta ? x[0].at({k, i}) : x[0].at({i, k})) * (tb ? x[1].at({j, k}) : x[1].at({k, j}));
                double c = x.size() > 2 && x[2].present ? x[2].bread({i, j}) : 0.0;
                y.v[y.ravel({i, j})] = alpha * acc + beta * c;
            }
        return Refs{y};
    };
}
inline RefFn matmul_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{ref_matmul(x[0], x[1], out[0])};
    };
}
// Along `axis`: visits every line (all indices but axis) with the flat positions of its elements.
inline void for_each_line(const Shape& s, int axis, const std::function<void(const std::vector<int64_t>&)>& f) {
    Arr a(s);
    for (int64_t i = 0; i < a.numel(); ++i) {
        auto idx = a.unravel(i);
        if (idx[axis] != 0) continue;
        std::vector<int64_t> line;
        for (int64_t r = 0; r < s[axis]; ++r) {
            idx[axis] = r;
            line.push_back(a.ravel(idx));
        }
        f(line);
    }
}
inline int norm_axis(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }
inline RefFn softmax_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            double m = -INFINITY, s = 0;
            for (int64_t p : line) m = std::max(m, x[0].v[p]);
            for (int64_t p : line) s += std::exp(x[0].v[p] - m);
            for (int64_t p : line) y.v[p] = std::exp(x[0].v[p] - m) / s;
        });
        return Refs{y};
    };
}
inline RefFn argmax_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr y(out[0]);
        bool last = n.attr_int("select_last_index", 0);
        int64_t k = 0;
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", 0), x[0].rank()), [&](const std::vector<int64_t>& line) {
            int64_t best = 0;
            for (size_t r = 1; r < line.size(); ++r) {
                double v = x[0].v[line[r]], b = x[0].v[line[best]];
                if (v > b || (last && v == b)) best = static_cast<int64_t>(r);
            }
            y.v[k++] = static_cast<double>(best);  // lines are visited in output row-major order
        });
        return Refs{y};
    };
}
inline RefFn transpose_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Ints perm = n.attr_ints("perm");
        if (perm.empty())
            for (int i = x[0].rank() - 1; i >= 0; --i) perm.push_back(i);
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            std::vector<int64_t> idx(perm.size());
            for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = o[k];
            y.v[f] = x[0].at(idx);
        }
        return Refs{y};
    };
}
inline RefFn concat_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr y(out[0]);
        int axis = norm_axis(n.attr_int("axis", 0), y.rank());
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            size_t k = 0;
            while (o[axis] >= x[k].shape[axis]) o[axis] -= x[k++].shape[axis];
            y.v[f] = x[k].at(o);
        }
        return Refs{y};
    };
}

// LayerNormalization from the spec: per row of x.shape[:axis], two-pass mean / variance.
inline RefFn layer_norm_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int axis = norm_axis(n.attr_int("axis", -1), x[0].rank());
        const double eps = n.attr_float("epsilon", 1e-5);
        int64_t cols = 1;
        for (int k = axis; k < x[0].rank(); ++k) cols *= x[0].shape[k];
        const int64_t rows = x[0].numel() / cols;
        Arr y(x[0].shape);
        Refs r{y};
        for (size_t i = 1; i < out.size(); ++i) r.emplace_back(out[i]);
        for (int64_t row = 0; row < rows; ++row) {
            double mean = 0, var = 0;
            for (int64_t c = 0; c < cols; ++c) mean += x[0].v[row * cols + c];
            mean /= cols;
            for (int64_t c = 0; c < cols; ++c) var += (x[0].v[row * cols + c] - mean) * (x[0].v[row * cols + c] - mean);
            var /= cols;
            const double inv = 1.0 / std::sqrt(var + eps);
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t f = row * cols + c;
                const auto idx = r[0].unravel(f);
                double v = (x[0].v[f] - mean) * inv * x[1].bread(idx);
                if (x.size() > 2 && x[2].present) v += x[2].bread(idx);
                r[0].v[f] = v;
            }
            if (r.size() > 1) r[1].v[row] = mean;
            if (r.size() > 2) r[2].v[row] = inv;
        }
        return r;
    };
}
// Every Reduce* op: each input element folds pre(x) into the output cell it maps to (reduced
// dims dropped or kept as size 1), starting from init, then post(acc). Straight from the spec.
inline Refs reduce_into(const std::vector<Arr>& x, const ir::Node& n, const Shape& out, double init,
                 const std::function<double(double, double)>& comb, const std::function<double(double)>& pre,
                 const std::function<double(double)>& post) {
    const int rank = x[0].rank();
    std::vector<bool> mask(rank, false);
    bool any = false;
    if (x.size() > 1 && x[1].present)
        for (double a : x[1].v) mask[norm_axis(static_cast<int64_t>(a), rank)] = any = true;
    if (!any && n.attr_int("noop_with_empty_axes", 0)) return Refs{x[0]};
    if (!any) mask.assign(rank, true);
    const bool keep = n.attr_int("keepdims", 1) != 0;
    Arr y(out);
    std::fill(y.v.begin(), y.v.end(), init);
    for (int64_t f = 0; f < x[0].numel(); ++f) {
        const auto idx = x[0].unravel(f);
        std::vector<int64_t> o;
        for (int k = 0; k < rank; ++k) {
            if (!mask[k])
                o.push_back(idx[k]);
            else if (keep)
                o.push_back(0);
        }
        const int64_t of = y.ravel(o);
        y.v[of] = comb(y.v[of], pre(x[0].v[f]));
    }
    for (double& v : y.v) v = post(v);
    return Refs{y};
}
// ReduceMean: the sum of each output cell over the (equal) number of elements mapped to it;
// integer means truncate.
inline RefFn reduce_mean_ref(bool is_int = false) {
    return [is_int](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const double count = static_cast<double>(x[0].numel()) / static_cast<double>(shape_numel(out[0]));
        return reduce_into(
            x, n, out[0], 0.0, [](double a, double b) { return a + b; }, [](double v) { return v; },
            [=](double v) { return is_int ? std::trunc(v / count) : v / count; });
    };
}
inline RefFn gather_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int axis = norm_axis(n.attr_int("axis", 0), x[0].rank());
        const int q = x[1].rank();
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            std::vector<int64_t> ii(o.begin() + axis, o.begin() + axis + q);
            int64_t k = static_cast<int64_t>(x[1].at(ii));
            if (k < 0) k += x[0].shape[axis];
            std::vector<int64_t> idx(o.begin(), o.begin() + axis);
            idx.push_back(k);
            idx.insert(idx.end(), o.begin() + axis + q, o.end());
            y.v[f] = x[0].at(idx);
        }
        return Refs{y};
    };
}

// Harness cases of the math op family (kept in their own block so families grow independently).

// Blocked-layout ops (transform_layout): naive loops over the blocked index formulas.
inline RefFn to_blocked_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const Shape& s = out[0];  // [N, C/c, H, W, c]
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t cb = 0; cb < s[1]; ++cb)
                for (int64_t h = 0; h < s[2]; ++h)
                    for (int64_t w = 0; w < s[3]; ++w)
                        for (int64_t ci = 0; ci < s[4]; ++ci) {
                            const int64_t c = cb * s[4] + ci;  // past X's channels: padding zeros
                            y.v[y.ravel({n, cb, h, w, ci})] = c < x[0].shape[1] ? x[0].v[x[0].ravel({n, c, h, w})] : 0.0;
                        }
        return Refs{y};
    };
}
inline RefFn from_blocked_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const Shape& s = x[0].shape;
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t c = 0; c < out[0][1]; ++c)  // the first `channels` channels
                for (int64_t h = 0; h < s[2]; ++h)
                    for (int64_t w = 0; w < s[3]; ++w)
                        y.v[y.ravel({n, c, h, w})] = x[0].v[x[0].ravel({n, c / s[4], h, w, c % s[4]})];
        return Refs{y};
    };
}
/// Direct convolution in the blocked layouts (zero padding; pads/strides/dilations attributes).
inline RefFn conv_nchwc_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& node, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Arr& W = x[1];
        Arr y(out[0]);
        const Ints st = node.attr_ints("strides", {1, 1}), dl = node.attr_ints("dilations", {1, 1}),
                   pd = node.attr_ints("pads", {0, 0, 0, 0});
        const Shape& o = out[0];
        const int64_t groups = node.attr_int("group", 1);  // output block ob reads its group's input blocks
        for (int64_t n = 0; n < o[0]; ++n)
            for (int64_t ob = 0; ob < o[1]; ++ob)
                for (int64_t oh = 0; oh < o[2]; ++oh)
                    for (int64_t ow = 0; ow < o[3]; ++ow)
                        for (int64_t oi = 0; oi < o[4]; ++oi) {
                            double s = x.size() > 2 && x[2].present ? x[2].v[x[2].ravel({ob, oi})] : 0.0;
                            const int64_t ib0 = ob / (o[1] / groups) * W.shape[1];
                            for (int64_t ib = 0; ib < W.shape[1]; ++ib)
                                for (int64_t kh = 0; kh < W.shape[2]; ++kh)
                                    for (int64_t kw = 0; kw < W.shape[3]; ++kw)
                                        for (int64_t ii = 0; ii < W.shape[4]; ++ii) {
                                            int64_t h = oh * st[0] + kh * dl[0] - pd[0];
                                            int64_t w = ow * st[1] + kw * dl[1] - pd[1];
                                            if (h < 0 || h >= X.shape[2] || w < 0 || w >= X.shape[3]) continue;
                                            s += X.v[X.ravel({n, ib0 + ib, h, w, ii})] * W.v[W.ravel({ob, ib, kh, kw, ii, oi})];
                                        }
                            y.v[y.ravel({n, ob, oh, ow, oi})] = s;
                        }
        return Refs{y};
    };
}

// KilnMatMulPackedB: Y[..., i, j] = alpha * sum_k A[..., i, k] * Bp[j / nb, k, j % nb] + beta * C
// (C broadcast from the right), naively in double.
inline RefFn matmul_packed_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& A = x[0];
        const Arr& Bp = x[1];
        const double alpha = n.attr_float("alpha", 1), beta = n.attr_float("beta", 1);
        const int64_t K = Bp.shape[1], nb = Bp.shape[2], N = out[0].back();
        Arr y(out[0]);
        const int64_t rows = y.numel() / N;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k) s += A.v[r * K + k] * Bp.v[((j / nb) * K + k) * nb + j % nb];
                double v = alpha * s;
                if (x.size() > 2) {  // C: [N] or [rows', N] with rows' 1 or the output's rows
                    const Arr& C = x[2];
                    const int64_t cn = C.shape.back(), cr = C.numel() / cn;
                    v += beta * C.v[(cr == 1 ? 0 : r) * cn + (cn == 1 ? 0 : j)];
                }
                y.v[r * N + j] = v;
            }
        return Refs{y};
    };
}

}  // namespace kiln::op::testing
