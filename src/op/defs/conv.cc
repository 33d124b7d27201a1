// Conv (N-d: 1-D, 2-D, 3-D, ...), ONNX opset 11 semantics: auto_pad, dilations, group,
// kernel_shape, pads, strides, optional bias.
//
// Compute, in stages:
//   pad  [N, C, P...]   = X inside the pads, 0 outside (only when there is padding);
//   acc  [N, M, O...]   = sum over (rc < C/group, rk...) of
//                         pad[n, g*C/group + rc, o*s + rk*d] * W[m, rc, rk...], g = m / (M/group);
//   out  [N, M, O...]   = acc + B[m] (only with a bias or a narrower storage type, f16/bf16).
// Schedule: the pad stage is materialized (a plain copy loop, vectorized) so the inner loop
// reads without bounds checks; acc runs n*m in parallel, then the outer output rows, the
// reduce loops, and the last output axis innermost and vectorized.
// The pad + acc core (conv_accumulate) and the schedule are shared with ConvInteger and
// QLinearConv (linear_util.h).
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "op/defs/linear_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "op/window.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

struct ConvShape {
    int64_t channels = 0, out_channels = 0, group = 1;
    std::vector<int64_t> in_spatial, kernel;
    WindowGeometry geo;
};

ConvShape conv_shape(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& w) {
    KILN_CHECK(x.rank() >= 3, kInvalidModel)
        << node_label(n) << ": input X must have rank >= 3 (N, C, spatial...), got rank " << x.rank();
    KILN_CHECK(x.rank() == w.rank(), kInvalidModel)
        << node_label(n) << ": input X has rank " << x.rank() << " but W has rank " << w.rank();
    ConvShape cs;
    cs.group = n.attr_int("group", 1);
    KILN_CHECK(cs.group >= 1, kInvalidModel) << node_label(n) << ": group must be >= 1, got " << cs.group;
    cs.channels = static_dim(n, x.shape[1], "X");
    cs.out_channels = static_dim(n, w.shape[0], "W");
    int64_t wc = static_dim(n, w.shape[1], "W");
    KILN_CHECK(wc * cs.group == cs.channels, kInvalidModel)
        << node_label(n) << ": input X has " << cs.channels << " channels but W expects " << wc << " x group "
        << cs.group << " = " << wc * cs.group;
    KILN_CHECK(cs.out_channels % cs.group == 0, kInvalidModel)
        << node_label(n) << ": W has " << cs.out_channels << " output channels, not divisible by group " << cs.group;
    for (int i = 2; i < x.rank(); ++i) {
        cs.in_spatial.push_back(static_dim(n, x.shape[i], "X"));
        cs.kernel.push_back(static_dim(n, w.shape[i], "W"));
    }
    std::vector<int64_t> ks = n.attr_ints("kernel_shape");
    KILN_CHECK(ks.empty() || ks == cs.kernel, kInvalidModel)
            << node_label(n) << ": kernel_shape " << shape_str(ks) << " does not match W's spatial shape "
            << shape_str(cs.kernel);
    cs.geo = window_geometry(n, cs.in_spatial, cs.kernel, false);
    return cs;
}

std::vector<ir::TensorType> conv_infer(const ir::Node& n) {
    const auto& w = input_type(n, 1, "W");
    const ir::TensorType& x_in = input_type(n, 0, "X");
    check_dtype(n, "X", x_in.dtype, float_types());
    check_same_dtype(n, "X", x_in.dtype, "W", w.dtype);
    // Symbolic spatial dims (a symbolic compile): checked at a stand-in size, output as dim
    // expressions (window_out_dims).
    ir::TensorType x = x_in;
    bool symbolic = false;
    for (int i = 2; i < x.rank(); ++i)
        if (!x.shape[static_cast<size_t>(i)].is_static()) x.shape[static_cast<size_t>(i)] = ir::Dim(int64_t{1} << 30), symbolic = true;
    ConvShape cs = conv_shape(n, x, w);
    if (has_input(n, 2)) {
        const auto& b = n.input(2)->type();
        check_same_dtype(n, "X", x.dtype, "B", b.dtype);
        KILN_CHECK(b.rank() == 1 && b.shape[0] == ir::Dim(cs.out_channels), kInvalidModel)
            << node_label(n) << ": bias B must have shape [" << cs.out_channels << "], got " << dims_str(b.shape);
    }
    std::vector<ir::Dim> out = {x.shape[0], cs.out_channels};
    if (symbolic) {
        const std::vector<ir::Dim> o = window_out_dims(n, {x_in.shape.begin() + 2, x_in.shape.end()}, cs.kernel, false);
        out.insert(out.end(), o.begin(), o.end());
    } else {
        for (int64_t o : cs.geo.out) out.push_back(o);
    }
    return {{x.dtype, out}};
}

std::vector<te::Tensor> conv_compute(const ComputeArgs& a) {
    const DType cdt = te::compute_dtype(a.out_dtype());
    const bool has_bias = a.has_input(2);
    const bool epilogue = has_bias || cdt != a.out_dtype();
    te::Tensor acc = conv_accumulate(a.node, a.in(0), a.in(1), a.out_shape(), cdt, epilogue ? "conv_acc" : "Conv");
    if (!epilogue) return {acc};
    te::Tensor bias = has_bias ? a.in(2) : nullptr;
    te::Tensor out = te::compute(
        a.out_shape(), [&](const std::vector<Var>& i) {
            Expr v = te::read(acc, i);
            return bias ? v + te::read(bias, {Expr(i[1])}) : v;
        },
        "Conv", a.out_dtype());
    return {out};
}

// Output channels per grouped tile: the largest of 8..1 dividing the channels per group `mg`, so
// a tile's channels read the same input channels (the simplifier proves floordiv(m, mg)
// independent of the tile's channel loop, so each input vector is loaded once per tile).
int64_t grouped_tile_channels(int64_t mg) {
    for (int64_t c = 8; c > 1; --c)
        if (mg % c == 0) return c;
    return 1;
}

// Output columns per grouped tile for `mb` channels: the largest divisor of OW with at most
// 24 vector accumulators (mb x ceil(t / vec)) and t <= 2 vectors, whole vectors first; without
// one of at least 4, one vector with a guarded tail.
// NOTE: a longer row (56 columns) is one vectorized loop GCC does not unroll, so the tile stays
// in memory: slower than accumulating in the output (128 channels, group 32, 56x56: 0.94 ->
// 1.44 ms at t = 56).
int64_t grouped_tile_columns(int64_t mb, int64_t ow, int64_t vec) {
    for (int64_t t : {2 * vec, vec})  // whole vectors first (28 columns take 16 + 8 + 4 lanes)
        if (ow % t == 0 && mb * (t / vec) <= 24) return t;
    for (int64_t t = std::min<int64_t>(ow, 2 * vec); t >= 4; --t)
        if (ow % t == 0 && mb * ((t + vec - 1) / vec) <= 24) return t;
    return std::min(ow, vec);
}

// The channels per group of a grouped 2-D accumulation stage (0: not grouped, or not 2-D): the
// stage reads an input of its rank (X or its padding) with more channels than the reduction's
// rc extent (a dense conv reads all C = rc of them).
int64_t grouped_channels_per_group(const te::Stage& st) {
    const te::Tensor& t = st.tensor();
    if (t->ndim() != 4 || t->dtype != DType::kFloat32) return 0;
    const int64_t cg = st.all_reduce_axes()[0]->extent;
    for (const te::Tensor& in : t->inputs())
        if (in->ndim() >= 4 && in->shape[1] > cg && in->shape[1] % cg == 0) {  // 5-D: phases
            const int64_t groups = in->shape[1] / cg;
            return t->shape[1] % groups == 0 ? t->shape[1] / groups : 0;
        }
    return 0;
}

// The grouped conv's register tile: (n, m-outer) fused (in parallel when `par`), oh, the
// column blocks, the reduce loops (rc, kh, kw), then mb channels (unrolled) x t columns
// (vectorized) accumulated in a local tile (Stage::cache_write_local) and written once: every
// input vector (t columns of one row, strided for stride 2) feeds mb FMAs against broadcast
// weights. Accumulating in the output row instead (one load and store per FMA) ran at 3-4
// GFLOP/s on ResNeXt-50's grouped 3x3s.
void schedule_grouped_tile(te::Stage& st, int64_t mg, bool par) {
    const Shape& sh = st.tensor()->shape;  // [n, m, oh, ow]
    const int64_t mb = grouped_tile_channels(mg);
    const int64_t t = grouped_tile_columns(mb, sh[3], vector_width(st.tensor()->dtype));
    auto [mo, mi] = st.split(st.axis(1), mb);
    te::IterVar owo, owi = st.axis(3);
    if (t < sh[3]) std::tie(owo, owi) = st.split(st.axis(3), t);
    std::vector<te::IterVar> order = {st.axis(0), mo, st.axis(2)};
    if (owo) order.push_back(owo);
    for (const auto& r : st.all_reduce_axes()) order.push_back(r);
    order.push_back(mi);
    order.push_back(owi);
    st.reorder(order);
    te::IterVar nm = st.fuse(st.axis(0), mo);
    if (mb > 1) st.unroll(mi);
    st.vectorize(owi);
    st.cache_write_local();
    if (par) st.parallel(nm);
}

// Knobs: "conv_nchw.grouped" 1 = a grouped 2-D f32 conv (group > 1: ResNeXt's, and a depthwise
// conv with a channel multiplier, which stays NCHW) runs schedule_grouped_tile (default), 0 =
// the schedule below (declared for those convs with OW > 1); "conv_nchw.t" 0 = the reduce
// loops outside the whole vectorized last output axis, accumulating in the output (default);
// t > 0 = the last axis in blocks of t (all of it when t >= its extent) accumulated in a local
// register tile (Stage::cache_write_local) across the reduce loops, t in {16, 32, 64} below the
// extent and the extent itself when <= 64 (declared when the last axis is longer than 1);
// "conv_nchw.par" 0 = n*m in parallel (default), 1 = (n*m, first output row axis) fused in
// parallel (declared for 2-D and up when the stage runs in parallel).
void conv_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    te::ScheduleConfig& cfg = s.config();
    for (te::Stage& st : s.stages()) {
        if (stage_untouched(st) && st.tensor()->name == "conv_pad") schedule_rows(st, cfg);
        if (!stage_untouched(st) || st.all_reduce_axes().empty()) continue;
        // The accumulation stage: [n, m, o...] x [rc, rk...].
        const Shape& sh = st.tensor()->shape;
        const int nd = st.tensor()->ndim();
        int64_t work = st.tensor()->numel();
        for (const auto& r : st.all_reduce_axes()) work *= r->extent;
        const bool par = work > kParallelMin && sh[0] * sh[1] > 1;
        const int64_t mg = grouped_channels_per_group(st);
        if (mg > 0 && sh[3] > 1 && cfg.knob("conv_nchw.grouped", {1, 0}, 1) == 1) {
            schedule_grouped_tile(st, mg, par);
            continue;
        }
        const int64_t ow = sh[nd - 1];
        // A few output maps over a long last axis (a vocoder's final 8 -> 1 channel conv over
        // 16384 samples): accumulating in the output re-read and re-wrote all of it once per
        // (channel, tap), 11.5 GFLOP/s on one thread, and n*m = 1 left the other threads idle.
        // Tiles of 64 in registers, the tiles in parallel.
        const bool few_long_maps = nd >= 3 && ow >= 256 && sh[0] * sh[1] <= 4;
        int64_t t = 0;
        if (ow > 1 && nd >= 3) {
            std::vector<int64_t> ts = {0};
            for (int64_t c : {16, 32, 64})
                if (c < ow) ts.push_back(c);
            if (ow <= 64) ts.push_back(ow);
            t = cfg.knob("conv_nchw.t", ts, few_long_maps ? 64 : 0);
        }
        const bool rows_parallel =
            par && nd >= 4 && sh[2] > 1 && cfg.knob("conv_nchw.par", {0, 1}, 0) == 1;
        te::IterVar nm = st.fuse(st.axis(0), st.axis(1));
        std::vector<te::IterVar> order = {nm};
        for (int d = 2; d < nd - 1; ++d) order.push_back(st.axis(d));
        te::IterVar last = st.axis(nd - 1), tiles;
        if (t > 0 && t < ow) {
            auto [o, i] = st.split(last, t);
            order.push_back(o);
            last = i;
            tiles = o;
        }
        for (const auto& r : st.all_reduce_axes()) order.push_back(r);
        order.push_back(last);
        st.reorder(order);
        if (ow > 1) st.vectorize(last);
        if (t > 0) st.cache_write_local();
        te::IterVar outer = rows_parallel ? st.fuse(nm, st.axis(2)) : nm;
        if (few_long_maps && tiles && work > kParallelMin) {  // every map's tiles in parallel
            for (int d = 2; d < nd - 1; ++d) outer = st.fuse(outer, st.axis(d));
            st.parallel(st.fuse(outer, tiles));
        } else if (par) {
            st.parallel(outer);
        }
    }
    default_schedule(s, outputs);  // the epilogue stage
}

// ---- Gradient (op/gradient.h) ----
// The data gradient is a plain Conv (the op Kiln schedules best, and the one oneDNN takes:
// ConvTranspose's gather measured 2.5-14x slower); per spatial dim with kernel K, stride s,
// dilation d, pads pb/pe, input `in`, output O:
//  - dX[i] = sum_k dY[(i + pb - k d) / s] W[k] over the integral quotients: dY with s-1 zeros
//    inserted after each element (length O s), correlated at stride 1 and dilation d with W
//    flipped in space and with its two channel axes swapped inside each group, padded by
//    (K-1) d - pb at the begin and whatever makes the output length `in` at the end (a negative
//    pad crops with a Slice);
//  - dW[m, c, k] = sum_{n, o} dY[n, m, o] Xpad[n, c, o s + k d]: im2col (one strided Slice of
//    padded X per window offset, concatenated to [N, G, C/G * K, L]) times dY as
//    [N, G, L, M/G] in one MatMul batched over (N, G) (batched MatMuls of equal batch dims go to
//    oneDNN), summed over N. The classic alternative, X as [C, N, ...] correlated with dY as a
//    weight at stride d and dilation s, measured 13-16x slower on ResNet-18's 3x3 layers
//    (batch 16, 2 threads; equal on the 7x7 stem): its reduction (N O) is huge and its output
//    (K) tiny, which the conv schedule does not suit.
//  - dB = ReduceSum(dY) over N and the spatial axes.

std::vector<int64_t> iota_perm(size_t rank) {
    std::vector<int64_t> p(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
    return p;
}

ir::Value* transpose(GradientBuilder& b, ir::Value* v, std::vector<int64_t> perm) {
    if (perm == iota_perm(perm.size())) return v;
    return b.emit1("Transpose", {v}, {{"perm", std::move(perm)}});
}

// Slice of v over axes [2, 2 + begin.size()) from begin[i] to end[i] (a no-op range is skipped).
ir::Value* slice_spatial(GradientBuilder& b, ir::Value* v, const std::vector<int64_t>& begin,
                         const std::vector<int64_t>& end) {
    const Shape sh = v->type().static_shape();
    std::vector<int64_t> starts, ends, axes;
    for (size_t i = 0; i < begin.size(); ++i) {
        if (begin[i] == 0 && end[i] == sh[2 + i]) continue;
        starts.push_back(begin[i]);
        ends.push_back(end[i]);
        axes.push_back(static_cast<int64_t>(2 + i));
    }
    if (axes.empty()) return v;
    return b.emit1("Slice", {v, b.ints(starts), b.ints(ends), b.ints(axes)});
}

// dY with s-1 zeros after each element along every spatial dim whose stride s > 1.
ir::Value* insert_stride_zeros(GradientBuilder& b, ir::Value* dy, const std::vector<int64_t>& strides) {
    bool any = false;
    for (int64_t s : strides) any |= s > 1;
    if (!any) return dy;
    const Shape sh = dy->type().static_shape();
    const size_t sp = strides.size();
    Shape split = {sh[0], sh[1]}, full = {sh[0], sh[1]};
    std::vector<int64_t> pads(2 * (2 + 2 * sp), 0);
    const size_t rank = 2 + 2 * sp;
    for (size_t i = 0; i < sp; ++i) {
        split.push_back(sh[2 + i]);
        split.push_back(1);
        pads[rank + 2 + 2 * i + 1] = strides[i] - 1;  // end pad of the inserted unit axis
        full.push_back(sh[2 + i] * strides[i]);
    }
    ir::Value* padded = b.emit1("Pad", {b.reshape(dy, split), b.ints(pads)});
    return b.reshape(padded, full);
}

ir::Value* conv_data_grad(GradientBuilder& b, ir::Value* dy, ir::Value* w, const ConvShape& cs) {
    const WindowGeometry& g = cs.geo;
    const size_t sp = cs.kernel.size();
    const int64_t G = cs.group, cg = cs.channels / G, mg = cs.out_channels / G;
    // W [M, C/G, K...] -> [C, M/G, K...] flipped in space.
    Shape grouped = {G, mg, cg}, swapped = {cs.channels, mg};
    for (int64_t k : cs.kernel) {
        grouped.push_back(k);
        swapped.push_back(k);
    }
    std::vector<int64_t> perm = iota_perm(grouped.size());
    std::swap(perm[1], perm[2]);
    ir::Value* wt = b.reshape(transpose(b, b.reshape(w, grouped), perm), swapped);
    std::vector<int64_t> fstarts, fends, faxes, fsteps;
    for (size_t i = 0; i < sp; ++i) {
        if (cs.kernel[i] == 1) continue;
        fstarts.push_back(-1);
        fends.push_back(std::numeric_limits<int64_t>::min());
        faxes.push_back(static_cast<int64_t>(2 + i));
        fsteps.push_back(-1);
    }
    if (!faxes.empty()) wt = b.emit1("Slice", {wt, b.ints(fstarts), b.ints(fends), b.ints(faxes), b.ints(fsteps)});

    ir::Value* src = insert_stride_zeros(b, dy, g.strides);
    const Shape ss = src->type().static_shape();
    std::vector<int64_t> pads(2 * sp), crop_begin(sp, 0), crop_end(sp);
    for (size_t i = 0; i < sp; ++i) {
        const int64_t eff = (cs.kernel[i] - 1) * g.dilations[i] + 1, len = ss[2 + i];
        int64_t pb = eff - 1 - g.pads_begin[i];
        int64_t pe = cs.in_spatial[i] - 1 + eff - len - pb;
        crop_end[i] = len;
        if (pb < 0) crop_begin[i] = -pb, pb = 0;
        if (pe < 0) crop_end[i] = len + pe, pe = 0;
        pads[i] = pb;
        pads[sp + i] = pe;
    }
    src = slice_spatial(b, src, crop_begin, crop_end);
    return b.emit1("Conv", {src, wt},
                   {{"group", G}, {"dilations", g.dilations}, {"pads", pads},
                    {"strides", std::vector<int64_t>(sp, 1)}});
}

ir::Value* conv_weight_grad(GradientBuilder& b, ir::Value* x, ir::Value* dy, const ConvShape& cs) {
    const WindowGeometry& g = cs.geo;
    const size_t sp = cs.kernel.size();
    const Shape xs = x->type().static_shape(), ys = dy->type().static_shape();
    const int64_t n = xs[0], G = cs.group, cg = cs.channels / G, mg = cs.out_channels / G;
    int64_t L = 1, K = 1;
    for (size_t i = 0; i < sp; ++i) L *= ys[2 + i], K *= cs.kernel[i];
    // im2col: for each window offset k, the strided slice of padded X every output reads at k,
    // stacked as [N, C, K, O...].
    ir::Value* src = x;
    if (g.any_padding(cs.in_spatial)) {
        std::vector<int64_t> pads(2 * (2 + sp), 0);
        for (size_t i = 0; i < sp; ++i) pads[2 + i] = g.pads_begin[i], pads[2 + sp + 2 + i] = g.pads_end[i];
        src = b.emit1("Pad", {x, b.ints(pads)});
    }
    Shape one = {n, cs.channels, 1};
    for (size_t i = 0; i < sp; ++i) one.push_back(ys[2 + i]);
    std::vector<ir::Value*> taps;
    std::vector<int64_t> k(sp, 0), axes, steps = g.strides;
    for (size_t i = 0; i < sp; ++i) axes.push_back(static_cast<int64_t>(2 + i));
    for (int64_t t = 0; t < K; ++t) {
        std::vector<int64_t> starts(sp), ends(sp);
        for (size_t i = 0; i < sp; ++i) {
            starts[i] = k[i] * g.dilations[i];
            ends[i] = starts[i] + (ys[2 + i] - 1) * g.strides[i] + 1;
        }
        ir::Value* tap = b.emit1("Slice", {src, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)});
        taps.push_back(b.reshape(tap, one));
        for (int i = static_cast<int>(sp) - 1; i >= 0 && ++k[i] == cs.kernel[i]; --i) k[i] = 0;
    }
    ir::Value* cols = taps.size() == 1 ? taps[0] : b.emit1("Concat", taps, {{"axis", int64_t{2}}});
    cols = b.reshape(cols, {n, G, cg * K, L});
    // dY as [N, G, L, M/G]; a batched MatMul over (N, G), then the sum over N.
    ir::Value* dyt = transpose(b, b.reshape(dy, {n, G, mg, L}), {0, 1, 3, 2});
    ir::Value* prod = b.emit1("MatMul", {cols, dyt});  // [N, G, C/G * K, M/G]
    ir::Value* sum = b.emit1("ReduceSum", {prod, b.ints({0})}, {{"keepdims", int64_t{0}}});
    Shape wshape = {cs.out_channels, cg};
    wshape.insert(wshape.end(), cs.kernel.begin(), cs.kernel.end());
    return b.reshape(transpose(b, sum, {0, 2, 1}), wshape);  // [G, M/G, C/G * K]
}

// Whether Conv's gradients go to KilnConvGradData / KilnConvGradWeight: float32, the dtype of
// oneDNN's backward primitives, in a build with oneDNN (CMakeLists.txt defines KILN_HAVE_DNNL
// for this file); float64 (the gradient tests' dtype), the 16-bit floats and builds without
// oneDNN keep the decomposition above (the ops' own computes are unscheduled gathers).
bool conv_grad_kernels_fit(const ir::Value* x) { return KILN_HAVE_DNNL && x->type().dtype == DType::kFloat32; }

ir::AttrMap conv_grad_attrs(const ConvShape& cs, const char* extent_name, const std::vector<int64_t>& extent) {
    std::vector<int64_t> pads = cs.geo.pads_begin;
    pads.insert(pads.end(), cs.geo.pads_end.begin(), cs.geo.pads_end.end());
    return {{"group", cs.group}, {"strides", cs.geo.strides}, {"dilations", cs.geo.dilations}, {"pads", pads},
            {extent_name, extent}};
}

std::vector<ir::Value*> conv_gradient(GradientBuilder& b) {
    const ir::Node& n = b.node();
    ir::Value *x = b.input(0), *w = b.input(1);
    const ConvShape cs = conv_shape(n, x->type(), w->type());
    ir::Value* dy = b.output_grad(0);
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    if (!dy) return grads;
    if (conv_grad_kernels_fit(x)) {  // one kernel per gradient (op/defs/conv_grad.cc)
        if (b.needs_grad(0)) grads[0] = b.emit1("KilnConvGradData", {dy, w}, conv_grad_attrs(cs, "input_shape", cs.in_spatial));
        if (b.needs_grad(1)) grads[1] = b.emit1("KilnConvGradWeight", {x, dy}, conv_grad_attrs(cs, "kernel_shape", cs.kernel));
    } else {
        if (b.needs_grad(0)) grads[0] = conv_data_grad(b, dy, w, cs);
        if (b.needs_grad(1)) grads[1] = conv_weight_grad(b, x, dy, cs);
    }
    if (b.num_inputs() > 2 && b.input(2) && b.needs_grad(2)) {
        std::vector<int64_t> axes = {0};
        for (size_t i = 0; i < cs.kernel.size(); ++i) axes.push_back(static_cast<int64_t>(2 + i));
        grads[2] = b.emit1("ReduceSum", {dy, b.ints(axes)}, {{"keepdims", int64_t{0}}});
    }
    return grads;
}

// The padded input, [N, C, P...] = X inside the pads, 0 outside; with phases = s > 1 the last
// axis deinterleaved as [..., s, ceil(P/s)]: [..., r, j] = padded [..., j*s + r] (0 past the
// end), so a stride-s row of outputs reads contiguous columns (a grouped conv's vectors; a
// strided gather measured 5x the stride-1 time at the same flops).
te::Tensor conv_pad_stage(const ConvShape& cs, const te::Tensor& x,
                          const std::function<Expr(const std::vector<Expr>&)>& xval, int64_t phases,
                          bool keep_dtype) {
    const WindowGeometry& g = cs.geo;
    const int sp = g.spatial();
    Shape ps = {x->shape[0], x->shape[1]};
    for (int i = 0; i < sp; ++i) ps.push_back(g.padded_extent(i, cs.in_spatial[i]));
    if (phases > 1) {
        const int64_t p = ps.back();
        ps.back() = phases;
        ps.push_back((p + phases - 1) / phases);
    }
    return te::compute(
        ps, [&](const std::vector<Var>& i) {
            std::vector<Expr> idx = {i[0], i[1]};
            Expr inside;
            for (int d = 0; d < sp; ++d) {
                // With phases, the padded column of [.., r, j] is j*s + r.
                Expr pos = d == sp - 1 && phases > 1 ? Expr(i[3 + d]) * phases + Expr(i[2 + d])
                                                     : Expr(i[2 + d]);
                Expr p = pos - te::int_imm(g.pads_begin[d]);
                Expr ok = te::logical_and(p >= te::int_imm(0), p < te::int_imm(cs.in_spatial[d]));
                inside = inside ? te::logical_and(inside, ok) : ok;
                idx.push_back(clamp_index(p, cs.in_spatial[d]));
            }
            Expr v = xval(idx);
            return te::select(inside, v, te::make_const(v->dtype, 0));
        },
        "conv_pad", keep_dtype ? std::optional<DType>(x->dtype) : std::nullopt);
}

}  // namespace

std::vector<ir::Dim> conv_output_dims(const ir::Node& n, const ir::TensorType& x, const ir::TensorType& w) {
    ConvShape cs = conv_shape(n, x, w);
    std::vector<ir::Dim> out = {x.shape[0], cs.out_channels};
    for (int64_t o : cs.geo.out) out.push_back(o);
    return out;
}

te::Tensor conv_accumulate(const ir::Node& n, const te::Tensor& x, const te::Tensor& w, const Shape& out,
                           DType acc_dtype, const std::string& name, const ElemReader& read_x,
                           const ElemReader& read_w) {
    ConvShape cs = conv_shape(n, ir::TensorType::of_static(x->dtype, x->shape),
                              ir::TensorType::of_static(w->dtype, w->shape));
    const WindowGeometry& g = cs.geo;
    const int sp = g.spatial();
    auto xval = [&](const std::vector<Expr>& idx) { return read_x ? read_x(idx) : te::read(x, idx); };

    // A grouped 2-D f32 conv of stride s > 1 along W reads its input deinterleaved (phases).
    const int64_t phases = cs.group > 1 && cs.channels > cs.group && sp == 2 && g.strides[1] > 1 &&
                                   acc_dtype == DType::kFloat32 && !read_x
                               ? g.strides[1]
                               : 1;
    te::Tensor src = nullptr;  // the padded input (nullptr: read x directly)
    if (phases > 1 || g.any_padding(cs.in_spatial))
        src = conv_pad_stage(cs, x, xval, phases, !read_x);
    const int64_t cg = cs.channels / cs.group, mg = cs.out_channels / cs.group;
    te::IterVar rc = te::reduce_axis(cg, "rc");
    std::vector<te::IterVar> rk;
    for (int i = 0; i < sp; ++i) rk.push_back(te::reduce_axis(g.kernel[i], "rk" + std::to_string(i)));
    std::vector<te::IterVar> axes = {rc};
    axes.insert(axes.end(), rk.begin(), rk.end());
    return te::compute(
        out, [&](const std::vector<Var>& i) {
            Expr ch = cs.group == 1 ? Expr(rc->var) : te::floordiv(i[1], te::int_imm(mg)) * cg + Expr(rc->var);
            std::vector<Expr> xi = {i[0], ch}, wi = {i[1], rc->var};
            for (int d = 0; d < sp; ++d) {
                wi.push_back(rk[d]->var);
                if (d == sp - 1 && phases > 1) {  // o*s + k*d: phase (k*d) % s, column o + (k*d) / s
                    Expr kd = Expr(rk[d]->var) * g.dilations[d];
                    xi.push_back(te::floormod(kd, te::int_imm(phases)));
                    xi.push_back(Expr(i[2 + d]) + te::floordiv(kd, te::int_imm(phases)));
                    continue;
                }
                xi.push_back(Expr(i[2 + d]) * g.strides[d] + Expr(rk[d]->var) * g.dilations[d]);
            }
            Expr xv = src ? te::read(src, xi) : xval(xi);
            Expr wv = read_w ? read_w(wi) : te::read(w, wi);
            return te::sum(te::cast(acc_dtype, xv) * te::cast(acc_dtype, wv), axes);
        },
        name, acc_dtype);
}

void schedule_conv_stages(te::Schedule& s, const std::vector<te::Tensor>& outputs) { conv_schedule(s, outputs); }

void register_conv_ops(OpRegistry& r) {
    OpDef d;
    d.name = "Conv";
    d.onnx_versions = {1, 11};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = conv_window_attrs(true);
    d.infer = conv_infer;
    d.pattern = OpPattern::kOutEWiseFusable;
    d.compute = conv_compute;
    d.schedule = conv_schedule;
    d.gradient = conv_gradient;
    d.flops = [](const ir::Node& n) {  // 2 * outputs * (Cin/group * kernel elements)
        Shape w = n.input(1)->type().static_shape();
        double per_out = 1;
        for (size_t i = 1; i < w.size(); ++i) per_out *= static_cast<double>(w[i]);
        return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * per_out;
    };
    r.add(std::move(d));
}

}  // namespace kiln::op
