// Blocked-layout (NCHW{c}) depthwise convolution and pools (Kiln-internal; the transform-layout
// pass writes them so that a blocked activation stays blocked through whole networks):
//
//   KilnDepthwiseConv2dNCHWc (Conv's window attributes: auto_pad, dilations, kernel_shape, pads,
//   strides): X [N, C/c, H, W, c], W [C/c, KH, KW, c], optional B [C/c, c]
//       Y [N, C/c, OH, OW, c] = sum over (kh, kw) of
//           pad(X)[n, cb, oh*s + kh*d, ow*s + kw*d, ci] * W[cb, kh, kw, ci]  (+ B[cb, ci])
//     (ONNX Conv with group = C = M and weights [C, 1, KH, KW]; W is those weights reshaped to
//     [C/c, c, KH, KW] and transposed to [C/c, KH, KW, c]: oneDNN's Goihw16g for c = 16, and X
//     is its nChw16c.)
//   KilnMaxPoolNCHWc / KilnAveragePoolNCHWc (MaxPool / AveragePool attributes, no Indices):
//       X [N, C/c, H, W, c] -> Y [N, C/c, OH, OW, c], the NCHW pool applied per channel.
//   KilnGlobalAveragePoolNCHWc / KilnGlobalMaxPoolNCHWc: X [N, C/c, H, W, c] -> [N, C/c, 1, 1, c].
//
// The math is op/pool_compute.h's (the NCHW pools' own computes with one trailing dim, the
// channel block): padding, ceil_mode and the average count are those of defs/pool.cc.
//
// Schedule (one for all of them, on the stage with the window reduction): (n, cb, oh) fused in
// parallel, then blocks of T output columns, the window loops, and innermost the T columns
// (unrolled) times the c channels of the block (vectorized: 16 f32 = one AVX-512 vector). Each
// vector step reads c contiguous inputs and, for the depthwise conv, c contiguous weights: no
// broadcast, no gather. The padded source is inlined: a read outside X is a select on the window
// position (its condition does not depend on c, so the c loop stays one vector); a padded copy
// cost an allocation and a pass over X (the MaxPool of ResNet-50's stem 8x slower).
#include <algorithm>
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

constexpr const char* kDepthwise = "KilnDepthwiseConv2dNCHWc";

/// X of a blocked op: f32 [N, C/c, H, W, c] with static channel dims (N, H, W symbolic in a
/// symbolic compile).
const ir::TensorType& blocked_input(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    check_rank(n, "X", x.rank(), 5);
    check_dtype(n, "X", x.dtype, {DType::kFloat32});
    for (int i : {1, 4}) static_dim(n, x.shape[i], "X");
    return x;
}

// ---- KilnDepthwiseConv2dNCHWc ----

WindowGeometry depthwise_geometry(const ir::Node& n, const Shape& x, const Shape& w) {
    KILN_CHECK(w.size() == 4 && w[0] == x[1] && w[3] == x[4], kInvalidModel)
        << node_label(n) << ": W must be [C/c, KH, KW, c] = [" << x[1] << ", KH, KW, " << x[4] << "], got "
        << shape_str(w);
    std::vector<int64_t> kernel = {w[1], w[2]};
    std::vector<int64_t> ks = n.attr_ints("kernel_shape");
    KILN_CHECK(ks.empty() || ks == kernel, kInvalidModel)
        << node_label(n) << ": kernel_shape " << shape_str(ks) << " disagrees with W " << shape_str(w);
    return window_geometry(n, {x[2], x[3]}, kernel, false);
}

std::vector<ir::TensorType> depthwise_infer(const ir::Node& n) {
    const auto& x = blocked_input(n);
    const auto& w = input_type(n, 1, "W");
    check_same_dtype(n, "X", x.dtype, "W", w.dtype);
    Shape xs;  // symbolic dims at a stand-in size: the attributes' checks
    for (const ir::Dim& d : x.shape) xs.push_back(d.is_static() ? d.value : int64_t{1} << 30);
    WindowGeometry g = depthwise_geometry(n, xs, w.static_shape());
    if (has_input(n, 2)) {
        const auto& bias = n.input(2)->type();
        check_same_dtype(n, "X", x.dtype, "B", bias.dtype);
        KILN_CHECK(bias.static_shape() == Shape({xs[1], xs[4]}), kInvalidModel)
            << node_label(n) << ": bias must be [" << xs[1] << ", " << xs[4] << "], got " << bias.str();
    }
    if (!x.is_static()) {  // a symbolic compile: the output rows and columns as dim expressions
        const std::vector<ir::Dim> o = window_out_dims(n, {x.shape[2], x.shape[3]}, g.kernel, false);
        return {{x.dtype, {x.shape[0], xs[1], o[0], o[1], xs[4]}}};
    }
    return {{x.dtype, {x.shape[0], xs[1], g.out[0], g.out[1], xs[4]}}};
}

std::vector<te::Tensor> depthwise_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    const te::Tensor& w = a.in(1);
    WindowGeometry g = depthwise_geometry(a.node, x->shape, w->shape);
    te::Tensor src = padded_source(x, g, te::make_const(x->dtype, 0), "dwconv_nchwc_pad", /*trailing=*/1);
    auto rk = window_axes(g);
    const bool has_bias = a.has_input(2);
    te::Tensor acc = te::compute(
        a.out_shape(), [&](const std::vector<Var>& i) {
            Expr wv = te::read(w, {Expr(i[1]), Expr(rk[0]->var), Expr(rk[1]->var), Expr(i[4])});
            return te::sum(te::read(src, window_index(g, i, rk)) * wv, rk);
        },
        has_bias ? "dwconv_nchwc_acc" : kDepthwise, a.out_dtype());
    if (!has_bias) return {acc};
    const te::Tensor& bias = a.in(2);
    return {te::compute(
        a.out_shape(),
        [&](const std::vector<Var>& i) { return te::read(acc, i) + te::read(bias, {Expr(i[1]), Expr(i[4])}); },
        kDepthwise, a.out_dtype())};
}

// ---- pools ----

std::vector<ir::TensorType> window_pool_infer(const ir::Node& n) {
    const auto& x = blocked_input(n);
    if (!x.is_static()) return {{x.dtype, sym_pool_out_shape(n, x.shape, 1)}};  // a symbolic compile
    WindowGeometry g = pool_geometry(n, x.shape, /*trailing=*/1);
    return {{x.dtype, pool_out_shape(x.shape, g, 1)}};
}

std::vector<te::Tensor> max_pool_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    if (!x->is_static()) return {sym_window_pool(a, true, 1)};
    WindowGeometry g = pool_geometry(a.node, to_dims(x->shape), 1);
    te::Tensor src = max_pool_source(x, g, "maxpool_nchwc_pad", 1);
    return {max_pool_tensor(src, g, a.out_shape(), a.out_dtype(), a.node.op())};
}

std::vector<te::Tensor> average_pool_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    if (!x->is_static()) return {sym_window_pool(a, false, 1)};
    WindowGeometry g = pool_geometry(a.node, to_dims(x->shape), 1);
    const bool include_pad = a.node.attr_int("count_include_pad", 0) != 0;
    return {average_pool_tensor(x, g, a.out_shape(), a.out_dtype(), include_pad, a.node.op(), 1)};
}

std::vector<ir::TensorType> global_pool_infer(const ir::Node& n) {
    const auto& x = blocked_input(n);
    return {{x.dtype, {x.shape[0], x.shape[1], 1, 1, x.shape[4]}}};
}

// ---- schedule ----

/// Output columns per register block: the largest of 8..4 dividing OW (no tail), else 1.
int64_t column_block(int64_t ow) {
    for (int64_t t = 8; t >= 4; --t)
        if (ow % t == 0) return t;
    return ow <= 8 ? ow : 1;
}

// Knobs: "bwin.t" the unrolled column block: 1 (no block), the divisors of OW in [2, 8], 8 when
// OW > 8 (guarded tail) (declared when OW > 1); "bwin.par" 0 = (n, cb, oh) fused in parallel
// (default), 1 = (n, cb) in parallel with oh serial inside (declared when OH > 1, the stage runs
// in parallel and n * cb > 1).
void blocked_window_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    te::ScheduleConfig& cfg = s.config();
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st)) continue;
        const Shape& sh = st.tensor()->shape;
        if (sh.size() != 5) continue;
        if (st.all_reduce_axes().empty()) {
            if (st.tensor()->name.ends_with("_pad")) st.compute_inline();  // the read selects
            continue;
        }
        if (!st.tensor()->is_static()) {
            // A symbolic compile's pool: (images, channel blocks, output rows) in parallel (the
            // emitter divides the fused index by the run-time rows once per row), the columns,
            // the window, and the channel block innermost, accumulated in a register and
            // stored once. Rows in the loop nest of their own and the output as the
            // accumulator (initialized by a serial pass first) took 2.3-2.8x the static pool.
            te::IterVar rows = st.fuse(st.fuse(st.axis(0), st.axis(1)), st.axis(2));
            std::vector<te::IterVar> order = {rows, st.axis(3)};
            for (const auto& r : st.all_reduce_axes()) order.push_back(r);
            order.push_back(st.axis(4));
            st.reorder(order);
            st.vectorize(st.axis(4));
            st.cache_write_local();
            // A window pool's planes are large enough to share out.
            if (sh[2] != 1 || sh[3] != 1) st.parallel(rows);
            continue;
        }
        // [n, cb, oh, ow, c] with the window (or the whole plane) as reduce axes.
        int64_t work = st.tensor()->numel();
        for (const auto& r : st.all_reduce_axes()) work *= r->extent;
        const bool par = work > kParallelMin && sh[0] * sh[1] * sh[2] > 1;
        const bool rows_inside = par && sh[2] > 1 && sh[0] * sh[1] > 1 && cfg.knob("bwin.par", {0, 1}, 0) == 1;
        te::IterVar nb = st.fuse(st.axis(0), st.axis(1));
        te::IterVar nbh = rows_inside ? nb : st.fuse(nb, st.axis(2));
        std::vector<te::IterVar> order = {nbh};
        if (rows_inside) order.push_back(st.axis(2));
        te::IterVar owi = st.axis(3);
        int64_t t = column_block(sh[3]);
        if (sh[3] > 1) {
            std::vector<int64_t> ts = {1};
            for (int64_t c = 2; c <= std::min<int64_t>(8, sh[3]); ++c)
                if (sh[3] % c == 0) ts.push_back(c);
            if (sh[3] > 8) ts.push_back(8);
            t = cfg.knob("bwin.t", ts, t);
        }
        if (t > 1 && t < sh[3]) {
            auto [o, i] = st.split(st.axis(3), t);
            order.push_back(o);
            owi = i;
        }
        // The window's maximum or sum accumulates in registers, a tile of t columns by the
        // channel block, stored once per tile (an unblocked row, t = 1, takes one column per
        // tile); the output as the accumulator was initialized by a serial pass and
        // read-modified-written per window position (2-3x ONNX Runtime's pools, GoogLeNet).
        const bool local = (t > 1 ? t : 1) * sh[4] <= te::Stage::kMaxLocalElems;
        if (local && t == 1) order.push_back(owi);
        for (const auto& r : st.all_reduce_axes()) order.push_back(r);
        if (!(local && t == 1)) order.push_back(owi);
        order.push_back(st.axis(4));
        st.reorder(order);
        if (t > 1) st.unroll(owi);
        st.vectorize(st.axis(4));
        if (local) st.cache_write_local();
        if (par) st.parallel(nbh);
    }
    default_schedule(s, outputs);  // epilogues: bias, the average's division, fused consumers
}

double window_elements(const ir::Node& n) {
    std::vector<int64_t> k = n.attr_ints("kernel_shape");
    double e = 1;
    for (int64_t v : k) e *= static_cast<double>(v);
    return e;
}

double output_elements(const ir::Node& n) {
    return static_cast<double>(shape_numel(n.output(0)->type().static_shape()));
}

OpDef blocked_op(const char* name, InferFn infer, ComputeFn compute) {
    OpDef d;
    d.name = name;
    d.internal = true;
    d.infer = std::move(infer);
    d.pattern = OpPattern::kOutEWiseFusable;
    d.compute = std::move(compute);
    d.schedule = blocked_window_schedule;
    return d;
}

}  // namespace

void register_blocked_ops(OpRegistry& r) {
    {
        OpDef d = blocked_op(kDepthwise, depthwise_infer, depthwise_compute);
        d.min_inputs = 2;
        d.max_inputs = 3;
        d.attrs = conv_window_attrs(false);
        d.flops = [](const ir::Node& n) {  // 2 * outputs * KH * KW
            Shape w = n.input(1)->type().static_shape();
            return 2.0 * output_elements(n) * static_cast<double>(w[1] * w[2]);
        };
        r.add(std::move(d));
    }
    {
        OpDef d = blocked_op("KilnMaxPoolNCHWc", window_pool_infer, max_pool_compute);
        d.attrs = pool_window_attrs();
        d.flops = [](const ir::Node& n) { return output_elements(n) * window_elements(n); };
        r.add(std::move(d));
    }
    {
        OpDef d = blocked_op("KilnAveragePoolNCHWc", window_pool_infer, average_pool_compute);
        d.attrs = pool_window_attrs();
        d.attrs.push_back({"count_include_pad", AttrKind::kInt, ir::Attr(int64_t{0})});
        d.flops = [](const ir::Node& n) { return output_elements(n) * window_elements(n); };
        r.add(std::move(d));
    }
    for (bool is_max : {false, true}) {
        const char* name = is_max ? "KilnGlobalMaxPoolNCHWc" : "KilnGlobalAveragePoolNCHWc";
        OpDef d = blocked_op(name, global_pool_infer, [is_max, name](const ComputeArgs& a) {
            if (!is_max && !a.in(0)->is_static()) return std::vector<te::Tensor>{sym_global_average_pool(a, 1)};
            return std::vector<te::Tensor>{global_pool_tensor(a.in(0), a.out_shape(), a.out_dtype(), is_max, name, 1)};
        });
        d.flops = [](const ir::Node& n) {  // one per input element
            return static_cast<double>(shape_numel(n.input(0)->type().static_shape()));
        };
        r.add(std::move(d));
    }
}

}  // namespace kiln::op
