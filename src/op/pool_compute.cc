// Pool computes shared by the NCHW and the blocked pools (see pool_compute.h).
#include "op/pool_compute.h"

#include <algorithm>

#include "op/defs/flat_reduce.h"
#include "op/defs/row_reduce.h"
#include "op/op_util.h"
#include "support/error.h"

namespace kiln::op {

using te::Expr;
using te::Var;

std::vector<AttrSpec> pool_window_attrs() {
    return {{"auto_pad", AttrKind::kString, ir::Attr(std::string("NOTSET"))},
            {"ceil_mode", AttrKind::kInt, ir::Attr(int64_t{0})},
            {"dilations", AttrKind::kInts, std::nullopt},
            {"kernel_shape", AttrKind::kInts, std::nullopt, /*required=*/true},
            {"pads", AttrKind::kInts, std::nullopt},
            {"strides", AttrKind::kInts, std::nullopt}};
}

WindowGeometry pool_geometry(const ir::Node& n, const std::vector<ir::Dim>& x, int trailing) {
    KILN_CHECK(static_cast<int>(x.size()) >= 3 + trailing, kInvalidModel)
        << node_label(n) << ": input X must have rank >= " << 3 + trailing << " (N, C, spatial...), got rank "
        << x.size();
    std::vector<int64_t> in;
    for (size_t i = 2; i + trailing < x.size(); ++i) in.push_back(static_dim(n, x[i], "X"));
    std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
    KILN_CHECK(kernel.size() == in.size(), kInvalidModel)
        << node_label(n) << ": kernel_shape has " << kernel.size() << " entries but X has " << in.size()
        << " spatial dimensions";
    return window_geometry(n, in, kernel, n.attr_int("ceil_mode", 0) != 0);
}

std::vector<ir::Dim> pool_out_shape(const std::vector<ir::Dim>& x, const WindowGeometry& g, int trailing) {
    std::vector<ir::Dim> out = {x[0], x[1]};
    for (int64_t o : g.out) out.push_back(o);
    out.insert(out.end(), x.end() - trailing, x.end());
    return out;
}

te::Tensor padded_source(const te::Tensor& x, const WindowGeometry& g, Expr fill, const std::string& name,
                         int trailing) {
    const int sp = g.spatial();
    KILN_ICHECK(x->ndim() == 2 + sp + trailing) << "pool source of rank " << x->ndim() << " for " << sp << " spatial dims";
    std::vector<int64_t> in(x->shape.begin() + 2, x->shape.begin() + 2 + sp);
    if (!g.any_padding(in)) return x;
    Shape ps = x->shape;
    for (int i = 0; i < sp; ++i) ps[2 + i] = g.padded_extent(i, in[i]);
    return te::compute(
        ps, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            Expr inside;
            for (int d = 0; d < sp; ++d) {
                Expr p = Expr(i[2 + d]) - te::int_imm(g.pads_begin[d]);
                Expr ok = te::logical_and(p >= te::int_imm(0), p < te::int_imm(in[d]));
                inside = inside ? te::logical_and(inside, ok) : ok;
                idx[2 + d] = clamp_index(p, in[d]);
            }
            return te::select(inside, te::read(x, idx), fill);
        },
        name, x->dtype);
}

te::Tensor max_pool_source(const te::Tensor& x, const WindowGeometry& g, const std::string& name, int trailing) {
    const int sp = g.spatial();
    KILN_ICHECK(x->ndim() == 2 + sp + trailing)
        << "pool source of rank " << x->ndim() << " for " << sp << " spatial dims";
    std::vector<int64_t> in(x->shape.begin() + 2, x->shape.begin() + 2 + sp);
    if (!g.any_padding(in)) return x;
    for (int d = 0; d < sp; ++d) {
        const int64_t last = (g.out[d] - 1) * g.strides[d] - g.pads_begin[d];  // the last window's start
        if (g.dilations[d] != 1 || g.kernel[d] - 1 < g.pads_begin[d] || last > in[d] - 1)
            return padded_source(x, g, lowest_value(x->dtype), name, trailing);
    }
    Shape ps = x->shape;
    for (int i = 0; i < sp; ++i) ps[2 + i] = g.padded_extent(i, in[i]);
    return te::compute(
        ps, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            for (int d = 0; d < sp; ++d)
                idx[2 + d] = clamp_index(Expr(i[2 + d]) - te::int_imm(g.pads_begin[d]), in[d]);
            return te::read(x, idx);
        },
        name, x->dtype);
}

std::vector<te::IterVar> window_axes(const WindowGeometry& g) {
    std::vector<te::IterVar> rk;
    for (int i = 0; i < g.spatial(); ++i) rk.push_back(te::reduce_axis(g.kernel[i], "rk" + std::to_string(i)));
    return rk;
}

Expr window_pos(const WindowGeometry& g, int d, const Var& o, const te::IterVar& rk) {
    return Expr(o) * g.strides[d] + Expr(rk->var) * g.dilations[d];
}

std::vector<Expr> window_index(const WindowGeometry& g, const std::vector<Var>& i, const std::vector<te::IterVar>& rk) {
    std::vector<Expr> idx(i.begin(), i.end());
    for (int d = 0; d < g.spatial(); ++d) idx[2 + d] = window_pos(g, d, i[2 + d], rk[d]);
    return idx;
}

te::Tensor max_pool_tensor(const te::Tensor& src, const WindowGeometry& g, const Shape& out, DType dtype,
                           const std::string& name) {
    auto rk = window_axes(g);
    return te::compute(
        out, [&](const std::vector<Var>& i) { return te::max_reduce(te::read(src, window_index(g, i, rk)), rk); }, name,
        dtype);
}

std::optional<te::Tensor> separable_max_pool(const te::Tensor& x, const WindowGeometry& g, DType dtype,
                                             const std::string& name) {
    const int sp = g.spatial();
    if (x->ndim() != 2 + sp) return std::nullopt;
    for (int d = 0; d < sp; ++d) {
        const int64_t in = x->shape[2 + d], s = g.strides[d], pb = g.pads_begin[d], k = g.kernel[d];
        const int64_t last = (g.out[d] - 1) * s - pb;  // the last window's start
        if (g.dilations[d] != 1 || k > 16 || k - 1 < pb || last > in - 1) return std::nullopt;
    }
    te::Tensor cur = x;
    Shape shape = x->shape;
    for (int d = 0; d < sp; ++d) {
        shape[2 + d] = g.out[d];
        const int64_t in = x->shape[2 + d], s = g.strides[d], pb = g.pads_begin[d];
        const te::Tensor src = cur;
        cur = te::compute(
            shape, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                Expr m;
                for (int64_t k = 0; k < g.kernel[d]; ++k) {
                    idx[2 + d] = clamp_index(Expr(i[2 + d]) * s + te::int_imm(k - pb), in);
                    Expr v = te::read(src, idx);
                    m = m ? te::max(m, v) : v;
                }
                return m;
            },
            d + 1 == sp ? name : "maxpool_sep" + std::to_string(d), dtype);
    }
    return cur;
}

namespace {
// Number of k in [0, K) with lo <= start + k*d < hi (start may be negative).
Expr window_count(Expr start, int64_t K, int64_t d, int64_t lo, int64_t hi) {
    Expr kmin = te::max(te::int_imm(0), te::floordiv(te::int_imm(lo + d - 1) - start, te::int_imm(d)));
    Expr kmax = te::min(te::int_imm(K - 1), te::floordiv(te::int_imm(hi - 1) - start, te::int_imm(d)));
    return te::max(te::int_imm(0), kmax - kmin + 1);
}
}  // namespace

te::Tensor average_pool_tensor(const te::Tensor& x, const WindowGeometry& g, const Shape& out, DType dtype,
                               bool count_include_pad, const std::string& name, int trailing) {
    const int sp = g.spatial();
    const DType cdt = te::compute_dtype(dtype);
    std::vector<int64_t> in(x->shape.begin() + 2, x->shape.begin() + 2 + sp);
    te::Tensor src = padded_source(x, g, te::make_const(cdt, 0), "avgpool_pad", trailing);
    auto rk = window_axes(g);
    te::Tensor total = te::compute(
        out, [&](const std::vector<Var>& i) { return te::sum(te::read(src, window_index(g, i, rk)), rk); },
        "avgpool_sum", cdt);
    return te::compute(
        out, [&](const std::vector<Var>& i) {
            Expr count = te::int_imm(1);
            for (int d = 0; d < sp; ++d) {
                Expr start = Expr(i[2 + d]) * g.strides[d] - te::int_imm(g.pads_begin[d]);
                int64_t lo = count_include_pad ? -g.pads_begin[d] : 0;
                int64_t hi = count_include_pad ? in[d] + g.pads_end[d] : in[d];
                count = count * window_count(start, g.kernel[d], g.dilations[d], lo, hi);
            }
            return te::read(total, i) / te::cast(cdt, count);
        },
        name, dtype);
}

te::Tensor global_pool_tensor(const te::Tensor& x, const Shape& out, DType dtype, bool is_max, const std::string& name,
                              int trailing) {
    const DType cdt = te::compute_dtype(dtype);
    const int sp = x->ndim() - 2 - trailing;
    const Shape dims(x->shape.begin() + 2, x->shape.begin() + 2 + sp);
    const int64_t count = shape_numel(dims);
    const te::ReduceOp op = is_max ? te::ReduceOp::kMax : te::ReduceOp::kSum;
    const DType acc = is_max ? dtype : cdt;
    const std::string acc_name = is_max ? name : "gap_sum";
    te::Tensor total;
    const FlatReducePlan plan = plan_flat_reduce(cdt, x->shape[0] * x->shape[1], count);
    if (trailing == 0 && plan.lanes > 0) {
        // NC + spatial: each plane is one contiguous row, reduced in vector lanes (flat_reduce.h);
        // a reduce loop over it would chain every add on the last (no float reassociation).
        auto body = [&](const std::vector<Expr>& r, const Expr& k) {
            return te::cast(cdt, te::read(x, unflatten_index(r, k, dims)));
        };
        auto rows_of = [](const std::vector<Var>& o) { return std::vector<Expr>{o[0], o[1]}; };
        total = flat_reduce({x->shape[0], x->shape[1]}, count, plan, op, acc, body, out, rows_of, acc_name);
    } else {
        std::vector<te::IterVar> rk;
        for (int i = 0; i < sp; ++i) rk.push_back(te::reduce_axis(dims[i], "rk" + std::to_string(i)));
        total = te::compute(
            out, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                for (int d = 0; d < sp; ++d) idx[2 + d] = rk[d]->var;
                return reduce_with(op, te::cast(cdt, te::read(x, idx)), rk);
            },
            acc_name, acc);
    }
    if (is_max) return total;
    return te::compute(
        out, [&](const std::vector<Var>& i) {
            return te::read(total, i) / te::make_const(cdt, static_cast<double>(count));
        },
        name, dtype);
}

std::vector<ir::Dim> sym_pool_out_shape(const ir::Node& n, const std::vector<ir::Dim>& x, int trailing) {
    KILN_CHECK(static_cast<int>(x.size()) >= 3 + trailing, kInvalidModel)
        << node_label(n) << ": input X must have rank >= " << 3 + trailing << " (N, C, spatial...), got rank "
        << x.size();
    const std::vector<ir::Dim> in(x.begin() + 2, x.end() - trailing);
    const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
    KILN_CHECK(kernel.size() == in.size(), kInvalidModel)
        << node_label(n) << ": kernel_shape has " << kernel.size() << " entries but X has " << in.size()
        << " spatial dimensions";
    std::vector<ir::Dim> out = {x[0], x[1]};
    const bool ceil_mode = n.attr_int("ceil_mode", 0) != 0;
    // ceil_mode's last window may reach past the end padding, which an average with
    // count_include_pad leaves out of its count (ONNX Runtime's rule): not written symbolically.
    if (ceil_mode && n.op().find("AveragePool") != std::string::npos && n.attr_int("count_include_pad", 0) != 0) {
        for (size_t d = 0; d < in.size(); ++d) out.push_back(ir::Dim::sym("?"));
        out.insert(out.end(), x.end() - trailing, x.end());
        return out;
    }
    for (const ir::Dim& d : window_out_dims(n, in, kernel, ceil_mode)) out.push_back(d);
    out.insert(out.end(), x.end() - trailing, x.end());
    return out;
}

te::Tensor sym_window_pool(const ComputeArgs& a, bool is_max, int trailing) {
    te::Tensor x = a.in(0);
    const std::vector<Expr> xs = x->shape_exprs();
    const size_t sp = xs.size() - 2 - static_cast<size_t>(trailing);
    const std::vector<int64_t> kernel = a.node.attr_ints("kernel_shape");
    // The attributes at a stand-in size (SAME pads would follow the size: refused by infer's "?").
    const WindowGeometry g = window_geometry(a.node, std::vector<int64_t>(sp, int64_t{1} << 20), kernel, false);
    // ceil_mode's last window may reach past the input's end: its taps there are skipped as
    // padding's are.
    bool padded = a.node.attr_int("ceil_mode", 0) != 0;
    for (size_t d = 0; d < sp; ++d) padded |= g.pads_begin[d] != 0 || g.pads_end[d] != 0;
    const DType cdt = te::compute_dtype(a.out_dtype());
    std::vector<te::IterVar> rk;
    for (size_t d = 0; d < sp; ++d) rk.push_back(te::reduce_axis(kernel[d], "rk" + std::to_string(d)));
    // The input index of output o's tap rk along each spatial dim, and whether it is inside.
    auto tap = [&](const std::vector<Var>& o, std::vector<Expr>& idx) {
        idx = {o[0], o[1]};
        Expr inside;
        for (size_t d = 0; d < sp; ++d) {
            Expr p = Expr(o[2 + d]) * g.strides[d] + Expr(rk[d]->var) * g.dilations[d] - te::int_imm(g.pads_begin[d]);
            if (padded) {
                Expr ok = te::logical_and(p >= te::int_imm(0), p < xs[2 + d]);
                inside = inside ? te::logical_and(inside, ok) : ok;
                p = te::max(te::min(p, xs[2 + d] - te::int_imm(1)), te::int_imm(0));
            }
            idx.push_back(p);
        }
        for (size_t d = 2 + sp; d < xs.size(); ++d) idx.push_back(o[d]);
        return inside;
    };
    const std::vector<Expr> os = a.out_dims();
    // Undilated max windows need no guard: a tap outside the input reads the clamped edge
    // element, which is one of the window's own taps (ONNX pads are smaller than the window,
    // and a ceil-mode window starts inside the input), so the maximum is the same.
    bool contiguous = true;
    for (size_t d = 0; d < sp; ++d)
        contiguous &= g.dilations[d] == 1 && g.pads_begin[d] < kernel[d] && g.pads_end[d] < kernel[d];
    if (is_max)
        return te::sym_compute(
            os, [&](const std::vector<Var>& o) {
                std::vector<Expr> idx;
                Expr inside = tap(o, idx);
                Expr v = te::read(x, idx);
                if (inside && !contiguous) v = te::select(inside, v, lowest_value(x->dtype));
                return te::max_reduce(v, rk);
            },
            a.node.op(), a.out_dtype());
    const bool include_pad = a.node.attr_int("count_include_pad", 0) != 0;
    te::Tensor total = te::sym_compute(
        os, [&](const std::vector<Var>& o) {
            std::vector<Expr> idx;
            Expr inside = tap(o, idx);
            Expr v = te::cast(cdt, te::read(x, idx));
            if (inside) v = te::select(inside, v, te::make_const(cdt, 0));
            return te::sum(v, rk);
        },
        "avgpool_sum", cdt);
    int64_t window = 1;
    for (int64_t k : kernel) window *= k;
    te::Tensor count;
    if (padded && !include_pad)  // the taps inside the input
        count = te::sym_compute(
            os, [&](const std::vector<Var>& o) {
                std::vector<Expr> idx;
                Expr inside = tap(o, idx);
                return te::sum(te::select(inside, te::make_const(cdt, 1), te::make_const(cdt, 0)), rk);
            },
            "avgpool_count", cdt);
    return te::sym_compute(
        os, [&](const std::vector<Var>& o) {
            Expr c = count ? te::read(count, o) : te::make_const(cdt, static_cast<double>(window));
            return te::cast(a.out_dtype(), te::read(total, o) / c);
        },
        a.node.op(), a.out_dtype());
}

namespace {

/// The plain [N, C, spatial...] form's sums: each row of the last spatial axis summed over
/// vector lanes (lane_reduce: unit-stride vector steps, the tail added after), then the rows
/// summed. One reduction over every spatial axis chained each add on the last, one element at
/// a time (a float sum is not reassociated by the C compiler): 6.5x the static kernel.
te::Tensor sym_spatial_sums(const te::Tensor& x, const std::vector<Expr>& os, DType cdt) {
    const std::vector<Expr> xs = x->shape_exprs();
    const size_t nd = xs.size();
    te::Tensor rows = lane_reduce(
        xs, vector_width(cdt), te::ReduceOp::kSum, cdt,
        [&](const std::vector<Var>& i, Expr k) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[nd - 1] = std::move(k);
            return te::cast(cdt, te::read(x, idx));
        },
        "gap_rows");
    std::vector<te::IterVar> rk;
    for (size_t d = 2; d + 1 < nd; ++d) rk.push_back(te::reduce_axis(xs[d], "rk" + std::to_string(d - 2)));
    return te::sym_compute(
        os, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx = {i[0], i[1]};
            for (const te::IterVar& r : rk) idx.push_back(r->var);
            idx.push_back(te::int_imm(0));
            Expr v = te::read(rows, idx);
            return rk.empty() ? v : te::sum(v, rk);
        },
        "gap_sum", cdt);
}

}  // namespace

te::Tensor sym_global_average_pool(const ComputeArgs& a, int trailing) {
    te::Tensor x = a.in(0);
    const std::vector<Expr> xs = x->shape_exprs(), os = a.out_dims();
    const DType cdt = te::compute_dtype(a.out_dtype());
    const size_t spatial_end = xs.size() - static_cast<size_t>(trailing);
    std::vector<te::IterVar> rk;
    Expr count = te::int_imm(1);
    for (size_t d = 2; d < spatial_end; ++d) {
        rk.push_back(te::reduce_axis(xs[d], "rk" + std::to_string(d - 2)));
        count = count * xs[d];
    }
    te::Tensor total = trailing == 0 && xs.size() >= 3
                           ? sym_spatial_sums(x, os, cdt)
                           : te::sym_compute(
                                 os, [&](const std::vector<Var>& i) {
                                     std::vector<Expr> idx = {i[0], i[1]};
                                     for (const te::IterVar& r : rk) idx.push_back(r->var);
                                     for (size_t d = spatial_end; d < xs.size(); ++d) idx.push_back(i[d]);
                                     return te::sum(te::cast(cdt, te::read(x, idx)), rk);
                                 },
                                 "gap_sum", cdt);
    return te::sym_compute(
        os, [&](const std::vector<Var>& i) { return te::cast(a.out_dtype(), te::read(total, i) / te::cast(cdt, count)); },
        a.node.op(), a.out_dtype());
}

}  // namespace kiln::op
