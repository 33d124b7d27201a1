// Pools: MaxPool (optional Indices output), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool — N-d, NCHW...
//
// The window geometry, padding, MaxPool, AveragePool and GlobalAverage/MaxPool computes live in
// op/pool_compute.h (shared with the blocked pools of defs/blocked_ops.cc).
// MaxPool Indices: the smallest flat input index (row-major, or column-major spatial with
// storage_order=1) among in-bounds window positions equal to the max.
// LpPool: (sum over the window of |x|^p)^(1/p) over a zero-padded copy (pads add nothing);
// p = 1 and 2 use |x| / x*x and sqrt, other p use pow. GlobalLpPool / GlobalMaxPool reduce over
// every spatial dim.
#include <string>

#include "op/op_util.h"
#include "op/pool_compute.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "op/window.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// Pad stages row-wise (no div/mod per element), the rest generic. Knob "pool.vec" (declared for
// a window reduction whose output rows are longer than 1): 0 = the generic reduction schedule
// (every output element fused, in parallel when large, the window loops innermost; default),
// 1 = the leading output axes fused (in parallel when large), then the window loops, then the
// last output axis innermost and vectorized.
void pool_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const std::string& name = st.tensor()->name;
        const bool pad = name == "maxpool_pad" || name == "avgpool_pad" || name == "lppool_pad";
        if (stage_untouched(st) && pad) schedule_rows(st, s.config());
    }
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        const int nd = t->ndim();
        if (!stage_untouched(st) || st.all_reduce_axes().empty() || nd < 3 || t->shape[nd - 1] < 2) continue;
        if (s.config().knob("pool.vec", {0, 1}, 0) == 0) continue;
        te::IterVar f = st.axis(0);
        for (int i = 1; i < nd - 1; ++i) f = st.fuse(f, st.axis(i));
        std::vector<te::IterVar> order = {f};
        for (const auto& r : st.all_reduce_axes()) order.push_back(r);
        order.push_back(st.axis(nd - 1));
        st.reorder(order);
        st.vectorize(st.axis(nd - 1));
        int64_t work = t->numel();
        for (const auto& r : st.all_reduce_axes()) work *= r->extent;
        if (work > kParallelMin && t->numel() / t->shape[nd - 1] > 1) st.parallel(f);
    }
    default_schedule(s, outputs);
}

OpDef max_pool_op() {
    OpDef d;
    d.name = "MaxPool";
    d.onnx_versions = {1, 8, 10, 11, 12};
    d.max_outputs = 2;
    d.attrs = pool_window_attrs();
    d.attrs.push_back({"storage_order", AttrKind::kInt, ir::Attr(int64_t{0})});
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype,
                    {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8, DType::kUInt8});
        WindowGeometry g = pool_geometry(n, x.shape);
        auto out = pool_out_shape(x.shape, g);
        return std::vector<ir::TensorType>{{x.dtype, out}, {DType::kInt64, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        WindowGeometry g = pool_geometry(a.node, to_dims(x->shape));
        const int sp = g.spatial();
        te::Tensor src = padded_source(x, g, lowest_value(x->dtype), "maxpool_pad");
        te::Tensor y = max_pool_tensor(src, g, a.out_shape(0), a.out_dtype(0), "MaxPool");
        if (a.node.num_outputs() < 2) return std::vector<te::Tensor>{y};

        const bool col_major = a.node.attr_int("storage_order", 0) != 0;
        std::vector<int64_t> in(x->shape.begin() + 2, x->shape.end());
        auto rk2 = window_axes(g);
        const int64_t big = x->numel();
        te::Tensor ind = te::compute(
            a.out_shape(1), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx = {i[0], i[1]};
                Expr inside;
                int64_t spatial_numel = 1;
                for (int64_t e : in) spatial_numel *= e;
                Expr flat = (Expr(i[0]) * x->shape[1] + Expr(i[1])) * spatial_numel;
                Expr sflat = te::int_imm(0);
                int64_t stride = 1;
                for (int dd = 0; dd < sp; ++dd) {
                    Expr pos = window_pos(g, dd, i[2 + dd], rk2[dd]);
                    idx.push_back(pos);
                    Expr p = pos - te::int_imm(g.pads_begin[dd]);
                    Expr ok = te::logical_and(p >= te::int_imm(0), p < te::int_imm(in[dd]));
                    inside = inside ? te::logical_and(inside, ok) : ok;
                    if (col_major) {
                        sflat = sflat + p * stride;
                        stride *= in[dd];
                    } else {
                        sflat = sflat * in[dd] + p;
                    }
                }
                Expr hit = te::logical_and(inside, te::eq(te::read(src, idx), te::read(y, i)));
                return te::min_reduce(te::select(hit, flat + sflat, te::int_imm(big)), rk2);
            },
            "MaxPool_indices", DType::kInt64);
        return std::vector<te::Tensor>{y, ind};
    };
    d.schedule = pool_schedule;
    return d;
}

OpDef average_pool_op() {
    OpDef d;
    d.name = "AveragePool";
    d.onnx_versions = {1, 7, 10, 11, 19};
    d.attrs = pool_window_attrs();
    d.attrs.push_back({"count_include_pad", AttrKind::kInt, ir::Attr(int64_t{0})});
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        WindowGeometry g = pool_geometry(n, x.shape);
        return std::vector<ir::TensorType>{{x.dtype, pool_out_shape(x.shape, g)}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        WindowGeometry g = pool_geometry(a.node, to_dims(x->shape));
        const bool include_pad = a.node.attr_int("count_include_pad", 0) != 0;
        te::Tensor out = average_pool_tensor(x, g, a.out_shape(), a.out_dtype(), include_pad, "AveragePool");
        return std::vector<te::Tensor>{out};
    };
    d.schedule = pool_schedule;
    return d;
}

OpDef global_average_pool_op() {
    OpDef d;
    d.name = "GlobalAveragePool";
    d.onnx_versions = {1};
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 3, kInvalidModel)
            << node_label(n) << ": input X must have rank >= 3 (N, C, spatial...), got rank " << x.rank();
        std::vector<ir::Dim> out = {x.shape[0], x.shape[1]};
        for (int i = 2; i < x.rank(); ++i) {
            static_dim(n, x.shape[i], "X");
            out.push_back(1);
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        return std::vector<te::Tensor>{
            global_pool_tensor(a.in(0), a.out_shape(), a.out_dtype(), /*is_max=*/false, "GlobalAveragePool")};
    };
    return d;
}

// ---- LpPool, GlobalLpPool, GlobalMaxPool ----

// |v|^p, with the exact forms for p = 1 and 2.
Expr abs_pow(Expr v, int64_t p) {
    if (p == 2) return v * v;
    Expr a = te::unary(te::UnaryOp::kAbs, v);
    if (p == 1) return a;
    return te::binary(te::BinaryOp::kPow, a, te::make_const(v->dtype, static_cast<double>(p)));
}

// s^(1/p), with the exact forms for p = 1 and 2.
Expr root(Expr s, int64_t p) {
    if (p == 1) return s;
    if (p == 2) return te::unary(te::UnaryOp::kSqrt, s);
    return te::binary(te::BinaryOp::kPow, s, te::make_const(s->dtype, 1.0 / static_cast<double>(p)));
}

int64_t lp_order(const ir::Node& n) {
    const int64_t p = n.attr_int("p", 2);
    KILN_CHECK(p >= 1, kInvalidModel) << node_label(n) << ": attribute p must be >= 1, got " << p;
    return p;
}

OpDef lp_pool_op() {
    OpDef d;
    d.name = "LpPool";
    d.onnx_versions = {2, 11, 18};
    d.attrs = pool_window_attrs();
    d.attrs.push_back({"p", AttrKind::kInt, ir::Attr(int64_t{2})});
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        lp_order(n);
        WindowGeometry g = pool_geometry(n, x.shape);
        return std::vector<ir::TensorType>{{x.dtype, pool_out_shape(x.shape, g)}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        WindowGeometry g = pool_geometry(a.node, to_dims(x->shape));
        const int64_t p = lp_order(a.node);
        const DType cdt = te::compute_dtype(a.out_dtype());
        te::Tensor src = padded_source(x, g, te::make_const(cdt, 0), "lppool_pad");
        auto rk = window_axes(g);
        te::Tensor total = te::compute(
            a.out_shape(),
            [&](const std::vector<Var>& i) {
                return te::sum(abs_pow(te::cast(cdt, te::read(src, window_index(g, i, rk))), p), rk);
            },
            "lppool_sum", cdt);
        te::Tensor out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) { return root(te::read(total, i), p); }, "LpPool",
            a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.schedule = pool_schedule;
    return d;
}

// GlobalMaxPool (pool_compute.h) and GlobalLpPool (sum of |x|^p, then the p-th root) over all
// spatial dims.
OpDef global_pool_op(const char* name, bool is_max) {
    OpDef d;
    d.name = name;
    d.onnx_versions = is_max ? std::vector<int>{1} : std::vector<int>{2};
    if (!is_max) d.attrs = {{"p", AttrKind::kInt, ir::Attr(int64_t{2})}};
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 3, kInvalidModel)
            << node_label(n) << ": input X must have rank >= 3 (N, C, spatial...), got rank " << x.rank();
        std::vector<ir::Dim> out = {x.shape[0], x.shape[1]};
        for (int i = 2; i < x.rank(); ++i) out.push_back(1);
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [is_max, n = std::string(name)](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        if (is_max) return std::vector<te::Tensor>{global_pool_tensor(x, a.out_shape(), a.out_dtype(), true, n)};
        const DType cdt = te::compute_dtype(a.out_dtype());
        const int64_t p = lp_order(a.node);
        std::vector<te::IterVar> rk;
        for (int i = 2; i < x->ndim(); ++i) rk.push_back(te::reduce_axis(x->shape[i], "rk" + std::to_string(i - 2)));
        auto src = [&](const std::vector<Var>& i) {
            std::vector<Expr> idx = {i[0], i[1]};
            for (const auto& r : rk) idx.push_back(r->var);
            return te::cast(cdt, te::read(x, idx));
        };
        te::Tensor total = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) { return te::sum(abs_pow(src(i), p), rk); }, "glppool_sum",
            cdt);
        te::Tensor y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) { return root(te::read(total, i), p); }, n, a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
    r.add(lp_pool_op());
    r.add(global_pool_op("GlobalLpPool", false));
    r.add(global_pool_op("GlobalMaxPool", true));
    r.add(max_pool_op());
    r.add(average_pool_op());
    r.add(global_average_pool_op());
}

}  // namespace kiln::op
