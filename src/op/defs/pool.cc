// Pools: MaxPool (optional Indices output), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool — N-d, NCHW...
//
// The window geometry, padding, MaxPool, AveragePool and GlobalAverage/MaxPool computes live in
// op/pool_compute.h (shared with the blocked pools of defs/blocked_ops.cc).
// MaxPool without Indices and with dilation 1 runs as one pass per spatial dim over clamped window
// positions (separable_max_pool: no padded copy, unit-stride rows); otherwise over a padded copy.
// MaxPool Indices: the smallest flat input index (row-major, or column-major spatial with
// storage_order=1) among in-bounds window positions equal to the max.
// LpPool: (sum over the window of |x|^p)^(1/p) over a zero-padded copy (pads add nothing);
// p = 1 and 2 use |x| / x*x and sqrt, other p use pow. GlobalLpPool / GlobalMaxPool reduce over
// every spatial dim.
#include <algorithm>
#include <string>

#include "op/defs/flat_reduce.h"
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
/// The longest output row a window reduction accumulates in a local tile (a row of floats in
/// registers and L1; longer rows accumulate in the output).
constexpr int64_t kMaxLocalPoolRow = 256;

void pool_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        // The separable MaxPool's passes: (n, c) planes in parallel, the other axes serial loops
        // of known range inside (a parallel chunk's index divided per row kept GCC scalar), the
        // contiguous axis vectorized.
        const bool sep = t->name.starts_with("maxpool_sep") || (t->name == "MaxPool" && st.all_reduce_axes().empty());
        if (!stage_untouched(st) || !sep || t->ndim() < 3 || !t->is_static()) continue;
        te::IterVar f = fuse_leading(st, 2);
        st.vectorize(st.axis(t->ndim() - 1));
        if (t->numel() > kParallelMin && f->extent > 1) st.parallel(f);
    }
    for (te::Stage& st : s.stages()) {
        const std::string& name = st.tensor()->name;
        const bool pad = name == "maxpool_pad" || name == "avgpool_pad" || name == "lppool_pad";
        if (stage_untouched(st) && pad) schedule_rows(st, s.config());
    }
    for (te::Stage& st : s.stages()) {
        const te::Tensor& t = st.tensor();
        const int nd = t->ndim();
        if (!stage_untouched(st) || st.all_reduce_axes().empty() || nd < 3 || t->shape[nd - 1] < 2 || !t->is_static())
            continue;  // (symbolic pools: the default schedule)
        if (s.config().knob("pool.vec", {0, 1}, 1) == 0) continue;
        te::IterVar f = st.axis(0);
        for (int i = 1; i < nd - 1; ++i) f = st.fuse(f, st.axis(i));
        std::vector<te::IterVar> order = {f};
        for (const auto& r : st.all_reduce_axes()) order.push_back(r);
        order.push_back(st.axis(nd - 1));
        st.reorder(order);
        st.vectorize(st.axis(nd - 1));
        // The row accumulates in a local tile, written once: into the output, its zeroing was a
        // serial loop of its own and every window tap a load and store of the row.
        if (t->shape[nd - 1] <= kMaxLocalPoolRow) st.cache_write_local();
        int64_t work = t->numel();
        for (const auto& r : st.all_reduce_axes()) work *= r->extent;
        if (work > kParallelMin && t->numel() / t->shape[nd - 1] > 1) st.parallel(f);
    }
    default_schedule(s, outputs);
}

// ---- Gradients (op/gradient.h) ----
//  - MaxPool: the contribution goes to the argmax only: MaxPool's Indices (the smallest flat
//    index among the maxima, the element PyTorch routes to; taken from the node when it has
//    them in row-major order, else from a second MaxPool) and dY gathered per input by
//    KilnMaxPoolGrad (op/defs/pool_grad.cc), so ties never count twice. GlobalMaxPool is the
//    one-window case.
//  - AveragePool scatters dY back through Col2Im (the sum of overlapping blocks, computed as
//    a gather over the block offsets): a column tensor [N, C * K, L] (K window offsets, L output
//    positions) holds each output's contribution to each of its window's positions, and Col2Im
//    adds them into X's shape, dropping the padding positions; every window offset gets
//    dY / count, with the forward's count per output (count_include_pad either way, ceil_mode
//    windows clipped the same way).

// The Col2Im inverse of the windows of `g` over spatial dims `in`: cols [N, C, K, L] -> X shape.
ir::Value* windows_to_image(GradientBuilder& b, ir::Value* cols, const WindowGeometry& g,
                            const std::vector<int64_t>& in) {
    const Shape cs = cols->type().static_shape();
    const int sp = g.spatial();
    std::vector<int64_t> pads = g.pads_begin;
    pads.resize(2 * sp);
    for (int d = 0; d < sp; ++d) {
        // The end pad that makes Col2Im's block count the pool's output size (ceil_mode windows
        // may reach past the declared end pad; floor mode may leave the last rows unread).
        const int64_t eff = (g.kernel[d] - 1) * g.dilations[d] + 1;
        pads[sp + d] = std::max<int64_t>(0, (g.out[d] - 1) * g.strides[d] + eff - in[d] - g.pads_begin[d]);
    }
    ir::Value* flat = b.reshape(cols, {cs[0], cs[1] * cs[2], cs[3]});
    return b.emit1("Col2Im", {flat, b.ints(in), b.ints(g.kernel)},
                   {{"dilations", g.dilations}, {"pads", pads}, {"strides", g.strides}});
}

// dX of a max pool with geometry g over x, given its row-major Indices: one gather kernel
// (op/defs/pool_grad.cc).
ir::Value* max_pool_grad(GradientBuilder& b, ir::Value* x, ir::Value* dy, ir::Value* indices, const WindowGeometry& g) {
    const Shape xs = x->type().static_shape();
    std::vector<int64_t> pads = g.pads_begin;
    pads.insert(pads.end(), g.pads_end.begin(), g.pads_end.end());
    return b.emit1("KilnMaxPoolGrad", {dy, indices},
                   {{"kernel_shape", g.kernel}, {"strides", g.strides}, {"dilations", g.dilations}, {"pads", pads},
                    {"input_shape", std::vector<int64_t>(xs.begin() + 2, xs.end())}});
}

// The forward's row-major Indices: its own second output when it has one, else a second MaxPool
// with the same window (storage_order dropped: column-major indices would not match E).
ir::Value* row_major_indices(GradientBuilder& b) {
    const ir::Node& n = b.node();
    if (n.num_outputs() > 1 && n.attr_int("storage_order", 0) == 0) return b.output(1);
    ir::AttrMap attrs = n.attrs();
    attrs.erase("storage_order");
    return b.emit("MaxPool", {b.input(0)}, attrs, 2).at(1);
}

std::vector<ir::Value*> max_pool_gradient(GradientBuilder& b) {
    ir::Value* dy = b.output_grad(0);
    if (!dy || !b.needs_grad(0)) return {nullptr};
    WindowGeometry g = pool_geometry(b.node(), b.input(0)->type().shape);
    return {max_pool_grad(b, b.input(0), dy, row_major_indices(b), g)};
}

std::vector<ir::Value*> global_max_pool_gradient(GradientBuilder& b) {
    ir::Value* dy = b.output_grad(0);
    if (!dy || !b.needs_grad(0)) return {nullptr};
    const Shape xs = b.input(0)->type().static_shape();
    const std::vector<int64_t> in(xs.begin() + 2, xs.end());
    ir::Value* ind = b.emit("MaxPool", {b.input(0)}, {{"kernel_shape", in}}, 2).at(1);
    WindowGeometry g;
    g.kernel = in;
    g.strides = g.dilations = std::vector<int64_t>(in.size(), 1);
    g.pads_begin = g.pads_end = std::vector<int64_t>(in.size(), 0);
    g.out = std::vector<int64_t>(in.size(), 1);
    return {max_pool_grad(b, b.input(0), dy, ind, g)};
}

// 1 / count for each output position of an AveragePool, as the forward counts (pool_compute.cc).
Tensor inverse_counts(const WindowGeometry& g, const std::vector<int64_t>& in, bool include_pad, DType dtype) {
    const int sp = g.spatial();
    Shape shape(g.out.begin(), g.out.end());
    Tensor counts(DType::kFloat64, shape);
    const int64_t L = counts.numel();
    std::vector<int64_t> o(sp, 0);
    for (int64_t li = 0; li < L; ++li) {
        double c = 1;
        for (int d = 0; d < sp; ++d) {
            const int64_t lo = include_pad ? -g.pads_begin[d] : 0, hi = include_pad ? in[d] + g.pads_end[d] : in[d];
            int64_t inside = 0;
            for (int64_t k = 0; k < g.kernel[d]; ++k) {
                const int64_t p = o[d] * g.strides[d] - g.pads_begin[d] + k * g.dilations[d];
                inside += p >= lo && p < hi;
            }
            c *= static_cast<double>(inside);
        }
        counts.data_as<double>()[li] = c > 0 ? 1.0 / c : 0.0;
        for (int d = sp - 1; d >= 0 && ++o[d] == g.out[d]; --d) o[d] = 0;
    }
    if (dtype == DType::kFloat64) return counts;
    KILN_CHECK(dtype == DType::kFloat32, kUnsupported)
        << "AveragePool gradient in " << dtype_name(dtype) << " (f32 and f64 only)";
    Tensor f(DType::kFloat32, shape);
    for (int64_t i = 0; i < L; ++i) f.data_as<float>()[i] = static_cast<float>(counts.data_as<double>()[i]);
    return f;
}

std::vector<ir::Value*> average_pool_gradient(GradientBuilder& b) {
    ir::Value* dy = b.output_grad(0);
    if (!dy || !b.needs_grad(0)) return {nullptr};
    ir::Value* x = b.input(0);
    const Shape xs = x->type().static_shape();
    const std::vector<int64_t> in(xs.begin() + 2, xs.end());
    WindowGeometry g = pool_geometry(b.node(), x->type().shape);
    const bool include_pad = b.node().attr_int("count_include_pad", 0) != 0;
    int64_t L = 1, K = 1;
    for (int d = 0; d < g.spatial(); ++d) L *= g.out[d], K *= g.kernel[d];
    ir::Value* scaled = b.emit1("Mul", {dy, b.constant(inverse_counts(g, in, include_pad, x->type().dtype))});
    ir::Value* cols = b.emit1("Expand", {b.reshape(scaled, {xs[0], xs[1], 1, L}), b.ints({xs[0], xs[1], K, L})});
    return {windows_to_image(b, cols, g, in)};
}

std::vector<ir::Value*> global_average_pool_gradient(GradientBuilder& b) {
    ir::Value* dy = b.output_grad(0);
    if (!dy || !b.needs_grad(0)) return {nullptr};
    const ir::TensorType& xt = b.input(0)->type();
    const Shape xs = xt.static_shape();
    int64_t plane = 1;
    for (size_t d = 2; d < xs.size(); ++d) plane *= xs[d];
    ir::Value* scaled = b.emit1("Mul", {dy, b.scalar(1.0 / static_cast<double>(plane), xt.dtype)});
    return {b.emit1("Expand", {scaled, b.ints(xs)})};
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
        auto out = x.is_static() ? pool_out_shape(x.shape, pool_geometry(n, x.shape)) : sym_pool_out_shape(n, x.shape);
        return std::vector<ir::TensorType>{{x.dtype, out}, {DType::kInt64, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        if (!x->is_static()) {  // a symbolic compile (the Indices output is not built there)
            KILN_CHECK(a.node.num_outputs() < 2, kUnsupported)
                << node_label(a.node) << ": MaxPool's Indices output is not compiled symbolically yet";
            return std::vector<te::Tensor>{sym_window_pool(a, true)};
        }
        WindowGeometry g = pool_geometry(a.node, to_dims(x->shape));
        const int sp = g.spatial();
        if (a.node.num_outputs() < 2)
            if (auto y = separable_max_pool(x, g, a.out_dtype(0), "MaxPool")) return std::vector<te::Tensor>{*y};
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
    d.gradient = max_pool_gradient;
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
        if (!x.is_static()) return std::vector<ir::TensorType>{{x.dtype, sym_pool_out_shape(n, x.shape)}};
        WindowGeometry g = pool_geometry(n, x.shape);
        return std::vector<ir::TensorType>{{x.dtype, pool_out_shape(x.shape, g)}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        if (!x->is_static()) return std::vector<te::Tensor>{sym_window_pool(a, false)};
        WindowGeometry g = pool_geometry(a.node, to_dims(x->shape));
        const bool include_pad = a.node.attr_int("count_include_pad", 0) != 0;
        te::Tensor out = average_pool_tensor(x, g, a.out_shape(), a.out_dtype(), include_pad, "AveragePool");
        return std::vector<te::Tensor>{out};
    };
    d.schedule = pool_schedule;
    d.gradient = average_pool_gradient;
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
        for (int i = 2; i < x.rank(); ++i) out.push_back(1);  // symbolic spatial dims too (symbolic compiles)
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        if (!a.in(0)->is_static() || !a.output_dims.empty()) return std::vector<te::Tensor>{sym_global_average_pool(a)};
        return std::vector<te::Tensor>{
            global_pool_tensor(a.in(0), a.out_shape(), a.out_dtype(), /*is_max=*/false, "GlobalAveragePool")};
    };
    d.schedule = reduce_schedule;  // the flat form's lane partials (flat_reduce.h)
    d.gradient = global_average_pool_gradient;
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
    d.schedule = reduce_schedule;
    return d;
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
    r.add(lp_pool_op());
    r.add(global_pool_op("GlobalLpPool", false));
    OpDef gmp = global_pool_op("GlobalMaxPool", true);
    gmp.gradient = global_max_pool_gradient;
    r.add(std::move(gmp));
    r.add(max_pool_op());
    r.add(average_pool_op());
    r.add(global_average_pool_op());
}

}  // namespace kiln::op
