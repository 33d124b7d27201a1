// Blocked-layout convolution ops (Kiln-internal; the transform-layout pass writes them):
//
//   KilnLayoutToBlocked {block=c, padded_channels=P (default C)}:
//                                    X[N, C, H, W]        -> Y[N, P/c, H, W, c],
//                                    Y[n, cb, h, w, ci] = X[n, cb*c + ci, h, w] (0 from C on)
//   KilnLayoutFromBlocked {channels=C (default: all of them)}:
//                                    Y[N, P/c, H, W, c]   -> X[N, C, H, W] (the inverse; the
//                                    first C channels)
//   KilnConv2dNCHWc (Conv's window attributes and group G, default 1):
//       X [N, C/ci, H, W, ci], W [M/co, C/G/ci, KH, KW, ci, co], optional B [M/co, co]
//       Y [N, M/co, OH, OW, co] = sum over (icb, kh, kw, ii) of
//           pad(X)[n, g*C/G/ci + icb, oh*s + kh*d, ow*s + kw*d, ii] * W[ob, icb, kh, kw, ii, oi]  (+ B[ob, oi])
//       with g = ob / (M/G/co), the group of output block ob: each group's input and output
//       channels are whole blocks (ResNeXt's and RegNet's grouped 3x3 convs).
//
// The conv's schedule: the padding copy is materialized; the accumulation runs (n, ob-outer,
// oh) fused in parallel, then blocks of T output columns, the reduce loops (input-channel
// blocks, kernel window, input channels within the block), and innermost a register tile of
// OB output-channel blocks x T columns x co channels (vectorized: 16 f32 = one AVX-512 vector)
// accumulated in a local array (registers) and written once. Every vector step broadcasts one
// input value against one contiguous weight vector.
#include <algorithm>
#include <string>
#include <tuple>

#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "op/window.h"
#include "support/error.h"

namespace kiln::op {
namespace {

using te::Expr;
using te::Var;

std::vector<ir::TensorType> to_blocked_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    check_rank(n, "X", x.rank(), 4);
    const int64_t c = n.attr_int("block", 0);
    const int64_t ch = static_dim(n, x.shape[1], "X");
    const int64_t p = n.attr_int("padded_channels", ch);
    KILN_CHECK(c >= 1 && p >= ch && p % c == 0, kInvalidModel)
        << node_label(n) << ": block " << c << " must divide the padded channel count " << p << " (at least the "
        << ch << " channels of X)";
    return {{x.dtype, {x.shape[0], p / c, x.shape[2], x.shape[3], c}}};
}

std::vector<te::Tensor> to_blocked_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    const int64_t c = a.node.attr_int("block", 0), ch = x->shape[1];
    const bool padded = a.node.attr_int("padded_channels", ch) > ch;
    return {te::sym_compute(
        a.out_dims(),
        [&](const std::vector<Var>& i) {
            Expr k = Expr(i[1]) * c + Expr(i[4]);
            if (!padded) return te::read(x, {Expr(i[0]), k, i[2], i[3]});
            return te::select(k < te::int_imm(ch), te::read(x, {Expr(i[0]), clamp_index(k, ch), i[2], i[3]}),
                              te::make_const(x->dtype, 0));
        },
        "KilnLayoutToBlocked", a.out_dtype())};
}

// The transpose into the blocked layout, out[n, C/c, h, w, c] = in[n, (C/c)*c + c, h, w]: the
// natural loop nest (n, C-block, h parallel; w; c unrolled when small), so that every index is a
// sum of products. The default schedule fuses all five axes into one flat loop and recovers each
// index with five 64-bit divisions per element: a network's input conversion ([6, 3, 48, 192]
// into blocks of 3, PP-OCR's direction classifier) took 2.4 ms there, 4.7x the conv after it.
void to_blocked_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (const te::Tensor& out : outputs) {
        te::Stage& st = s[out];
        const Shape& sh = out->shape;  // [n, C/c, h, w, c]
        if (!stage_untouched(st) || st.is_inlined() || sh.size() != 5) continue;
        te::IterVar c = st.axis(4);
        te::IterVar outer = st.fuse(st.fuse(st.axis(0), st.axis(1)), st.axis(2));
        if (sh[4] <= 16) st.unroll(c);
        if (assumed_numel(out) >= kParallelMin) st.parallel(outer);  // symbolic dims: assumed sizes
    }
}

std::vector<ir::TensorType> from_blocked_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    check_rank(n, "X", x.rank(), 5);
    const int64_t cb = static_dim(n, x.shape[1], "X"), c = static_dim(n, x.shape[4], "X");
    const int64_t ch = n.attr_int("channels", cb * c);
    KILN_CHECK(ch >= 1 && ch <= cb * c, kInvalidModel)
        << node_label(n) << ": channels " << ch << " must be in [1, " << cb * c << "] (the blocks of X)";
    return {{x.dtype, {x.shape[0], ch, x.shape[2], x.shape[3]}}};
}

std::vector<te::Tensor> from_blocked_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    const int64_t c = x->shape[4];
    return {te::sym_compute(
        a.out_dims(),
        [&](const std::vector<Var>& i) {
            return te::read(x, {Expr(i[0]), te::floordiv(i[1], te::int_imm(c)), i[2], i[3],
                                te::floormod(i[1], te::int_imm(c))});
        },
        "KilnLayoutFromBlocked", a.out_dtype())};
}

// The transpose back from the blocked layout, out[n, C, h, w] = in[n, C / c, h, w, C % c]: per
// (n, 8 channels, h) tiles of 8 channels x 16 columns (vectorized along w), so the input a tile
// reads stays in L1. The default fused order walks w for each channel and touches one float per
// input cache line, streaming the whole input once per channel of a block (16x112x112 at 2
// threads: 142 us before, 59 us tiled; the fastest of 60 runs each). Tiles of 8 channels, not
// 16: where a channel's plane is a multiple of 4 KB (a 1-D signal of 1024, a 64x64 map) the 16
// rows a tile writes fall into one L1 set of 12 ways and thrash, and the compiler's full unroll
// of the 16x16 tile spills: [1, 128, 1, 1024] took 536 us, in tiles of 8 it takes ~40 us
// (0.31-0.37 ns an element at every plane size measured alone, against 0.34-4.2 for 16).
void from_blocked_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (const te::Tensor& out : outputs) {
        te::Stage& st = s[out];
        if (stage_untouched(st) && !st.is_inlined() && out->ndim() == 4) schedule_channel_tiles(st);
    }
}

struct BlockedConv {
    int64_t n, icb, ci, h, w, ocb, co, group;
    std::vector<int64_t> kernel;
};

BlockedConv blocked_conv(const ir::Node& n, const Shape& x, const Shape& w) {
    KILN_CHECK(x.size() == 5 && w.size() == 6, kInvalidModel)
        << node_label(n) << ": X must be [N, C/c, H, W, c] and W [M/co, C/G/ci, KH, KW, ci, co], got "
        << shape_str(x) << " and " << shape_str(w);
    const int64_t g = n.attr_int("group", 1);
    KILN_CHECK(g >= 1 && w[0] % g == 0, kInvalidModel)
        << node_label(n) << ": group " << g << " must divide the " << w[0] << " output-channel blocks";
    KILN_CHECK(w[1] * g == x[1] && w[4] == x[4], kInvalidModel)
        << node_label(n) << ": X " << shape_str(x) << " and W " << shape_str(w) << " disagree on input channels (group "
        << g << ")";
    return {x[0], x[1], x[4], x[2], x[3], w[0], w[5], g, {w[2], w[3]}};
}

std::vector<ir::TensorType> conv_nchwc_infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    const auto& w = input_type(n, 1, "W");
    check_dtype(n, "X", x.dtype, {DType::kFloat32});
    check_same_dtype(n, "X", x.dtype, "W", w.dtype);
    Shape xs;  // symbolic dims (a symbolic compile) at a stand-in size: the attributes' checks
    for (const ir::Dim& d : x.shape) xs.push_back(d.is_static() ? d.value : int64_t{1} << 30);
    BlockedConv b = blocked_conv(n, xs, w.static_shape());
    if (has_input(n, 2)) {
        const auto& bias = n.input(2)->type();
        check_same_dtype(n, "X", x.dtype, "B", bias.dtype);
        KILN_CHECK(bias.static_shape() == Shape({b.ocb, b.co}), kInvalidModel)
            << node_label(n) << ": bias must be [" << b.ocb << ", " << b.co << "], got " << bias.str();
    }
    if (!x.is_static()) {  // the output rows and columns as dim expressions
        const std::vector<ir::Dim> o = window_out_dims(n, {x.shape[2], x.shape[3]}, b.kernel, false);
        return {{x.dtype, {x.shape[0], b.ocb, o[0], o[1], b.co}}};
    }
    WindowGeometry g = window_geometry(n, {b.h, b.w}, b.kernel, false);
    return {{x.dtype, {b.n, b.ocb, g.out[0], g.out[1], b.co}}};
}

std::vector<te::Tensor> conv_nchwc_compute(const ComputeArgs& a) {
    const te::Tensor& x = a.in(0);
    const te::Tensor& w = a.in(1);
    // A symbolic compile's batch (the spatial dims static: compiler/symbolic_compile.cc): the
    // outer loop's extent; everything else as on static shapes.
    const Expr batch = x->shape_exprs()[0];
    Shape xs = x->shape;
    xs[0] = 1;
    BlockedConv b = blocked_conv(a.node, xs, w->shape);
    WindowGeometry g = window_geometry(a.node, {b.h, b.w}, b.kernel, false);
    te::Tensor src = x;
    if (g.any_padding({b.h, b.w})) {
        const int64_t hw[2] = {b.h, b.w};
        std::vector<Expr> ps = {batch, te::int_imm(b.icb), te::int_imm(g.padded_extent(0, b.h)),
                                te::int_imm(g.padded_extent(1, b.w)), te::int_imm(b.ci)};
        src = te::sym_compute(
            ps, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx = {i[0], i[1]};
                Expr inside;
                for (int d = 0; d < 2; ++d) {
                    Expr p = Expr(i[2 + d]) - te::int_imm(g.pads_begin[d]);
                    Expr ok = te::logical_and(p >= te::int_imm(0), p < te::int_imm(hw[d]));
                    inside = inside ? te::logical_and(inside, ok) : ok;
                    idx.push_back(clamp_index(p, hw[d]));
                }
                idx.push_back(i[4]);
                return te::select(inside, te::read(x, idx), te::make_const(x->dtype, 0));
            },
            "conv_nchwc_pad", x->dtype);
    }
    te::IterVar ricb = te::reduce_axis(b.icb / b.group, "ricb"), rkh = te::reduce_axis(b.kernel[0], "rkh"),
                rkw = te::reduce_axis(b.kernel[1], "rkw"), rii = te::reduce_axis(b.ci, "rii");
    const bool has_bias = a.has_input(2);
    te::Tensor acc = te::sym_compute(
        a.out_dims(), [&](const std::vector<Var>& i) {
            // The input block: the reduce index within the output block's group.
            Expr xb = b.group == 1 ? Expr(ricb->var)
                                   : te::floordiv(i[1], te::int_imm(b.ocb / b.group)) * (b.icb / b.group) + Expr(ricb->var);
            Expr xv = te::read(src, {Expr(i[0]), xb, Expr(i[2]) * g.strides[0] + Expr(rkh->var) * g.dilations[0],
                                     Expr(i[3]) * g.strides[1] + Expr(rkw->var) * g.dilations[1], Expr(rii->var)});
            Expr wv = te::read(w, {Expr(i[1]), Expr(ricb->var), Expr(rkh->var), Expr(rkw->var), Expr(rii->var), Expr(i[4])});
            return te::sum(xv * wv, {ricb, rkh, rkw, rii});
        },
        has_bias ? "conv_nchwc_acc" : "KilnConv2dNCHWc", a.out_dtype());
    if (!has_bias) return {acc};
    const te::Tensor& bias = a.in(2);
    return {te::sym_compute(
        a.out_dims(),
        [&](const std::vector<Var>& i) { return te::read(acc, i) + te::read(bias, {Expr(i[1]), Expr(i[4])}); },
        "KilnConv2dNCHWc", a.out_dtype())};
}

/// The register tile of the micro-kernel: `ob` output-channel blocks x `t` output columns,
/// each one co-wide vector accumulator (co = 16 f32 is one AVX-512 register). Up to 24
/// accumulators (of 32 vector registers; the rest hold the weight vectors and a broadcast).
struct ConvTile {
    int64_t ob, t;
};

constexpr int64_t kConvAccumulators = 24;

/// The default output-channel block: 2 when it divides the channel blocks, else 1.
int64_t default_conv_ob(int64_t ocb) { return ocb % 2 == 0 ? 2 : 1; }

/// The default column block for `ob` channel blocks: the largest divisor of OW in
/// [4, 24/ob] (no tail), else half the register budget with the last block guarded.
int64_t default_conv_t(int64_t ob, int64_t ow) {
    const int64_t max_t = kConvAccumulators / ob;
    for (int64_t t = std::min(max_t, ow); t >= 4; --t)
        if (ow % t == 0) return t;
    return std::min(ow, std::max<int64_t>(max_t / 2, 4));
}

/// The tile with the schedule's knobs: "conv.ob" in {1, 2, 3, 4} dividing the channel blocks
/// (declared when there are at least two), then "conv.t" for that ob: the divisors of OW in
/// [2, 24/ob], 24/ob itself and half of it (guarded tails), OW when it fits, capped at OW
/// (declared when OW > 1). Every choice keeps ob * t <= 24 accumulators, so the tile fits the
/// registers. With an empty config: exactly the default tile.
ConvTile conv_tile(te::ScheduleConfig& cfg, int64_t ocb, int64_t ow) {
    int64_t ob = default_conv_ob(ocb);
    if (ocb > 1) {
        std::vector<int64_t> obs;
        for (int64_t o = 1; o <= 4; ++o)
            if (ocb % o == 0) obs.push_back(o);
        ob = cfg.knob("conv.ob", obs, ob);
    }
    int64_t t = default_conv_t(ob, ow);
    if (ow > 1) {
        const int64_t max_t = kConvAccumulators / ob;
        std::vector<int64_t> ts;
        for (int64_t c = std::min(max_t, ow); c >= 2 && ts.size() < 5; --c)
            if (ow % c == 0) ts.push_back(c);
        for (int64_t c : {max_t, max_t / 2}) ts.push_back(std::min(c, ow));
        t = cfg.knob("conv.t", ts, t);
    }
    return {ob, t};
}

// The reduce loops (icb, kh, kw, ii) in the order of the knob "conv.order": 0 = (icb, kh, kw,
// ii) (the default for a full-vector output block), 1 = (kh, kw, icb, ii) (declared when there
// are several input-channel blocks and a window larger than 1x1), 2 = (kh, kw, ii, icb) (the
// default for an output block narrower than a vector, declared with several input-channel
// blocks).
// NOTE: with an 8-wide block (f32 on AVX-512) the whole register tile is small enough for GCC
// to unroll completely, which leaves the ii loop innermost; its input reads are contiguous in
// ii, so GCC vectorized *that* loop (16 lanes over ii, a strided weight gather, shuffles for
// every accumulator): 4.7 ms for a 1x1 144->24 at 56x56. With icb innermost (input reads a
// plane apart) it vectorizes the tile instead: two columns' broadcasts per 16-lane FMA.
std::vector<te::IterVar> conv_reduce_order(te::ScheduleConfig& cfg, std::vector<te::IterVar> r,
                                          bool narrow) {
    if (r.size() != 4 || r[0]->extent == 1) return r;
    std::vector<int64_t> orders = {0};
    if (r[1]->extent * r[2]->extent > 1) orders.push_back(1);
    if (narrow) orders.push_back(2);
    if (orders.size() == 1) return r;
    switch (cfg.knob("conv.order", orders, narrow ? 2 : 0)) {
        case 1: return {r[1], r[2], r[0], r[3]};
        case 2: return {r[1], r[2], r[3], r[0]};
        default: return r;
    }
}

// True when ii (the input channels of one block, last of the default order) is the only reduce
// loop longer than 1 and at most 16 long: one input-channel block and a 1x1 window. Unrolled, it
// leaves GCC the register tile to vectorize; as the tile's only enclosing loop, GCC 12
// vectorized the ii loop itself (16 lanes over ii, shuffles for every accumulator): a 1x1
// 16 -> 32 conv at 320x320 (PP-OCRv4's detector) took 40 ms, 1.9 ms unrolled. Only for tiles
// of at most 20 full vectors: GCC needs seconds for the unrolled 320 statements already, and
// over 30 s for a 24-column tile of an 8-channel block (PP-OCR's classifier), which it does not
// vectorize along ii anyway.
bool sole_short_ii(const std::vector<te::IterVar>& reduce) {
    if (reduce.empty() || reduce.back()->extent > 16) return false;
    for (size_t k = 0; k + 1 < reduce.size(); ++k)
        if (reduce[k]->extent > 1) return false;
    return true;
}

// The padding copy: rows of (columns x block). With blocks of one channel (an image,
// transform_layout) the rows are (n, cb, h) and the row is the columns: row by row over the
// 1-wide block, every element was a row of its own (a 3 x 226 x 226 copy took 0.4 ms).
void schedule_pad(te::Stage& st, te::ScheduleConfig& cfg) {
    const Shape& sh = st.tensor()->shape;  // [n, cb, h + pads, w + pads, c]
    if (sh.size() != 5 || sh[4] != 1) return schedule_rows(st, cfg);
    te::IterVar rows = st.fuse(st.fuse(st.axis(0), st.axis(1)), st.axis(2));
    te::IterVar cols = st.fuse(st.axis(3), st.axis(4));
    st.vectorize(cols);
    if (assumed_numel(st.tensor()) > kParallelMin && assumed(sh[0]) * sh[1] * sh[2] > 1) st.parallel(rows);
}

// The micro-kernel: per (n, ob-outer, oh) in parallel and each block of t columns, a local
// accumulator tile [ob x t x co] (Stage::cache_write_local) is initialized, the reduction runs
// over (icb, kh, kw, ii) with the tile innermost (ob and columns unrolled, co vectorized:
// one broadcast input value per column times one contiguous weight vector per ob, fused
// multiply-add into the register), and the tile is written to the output once.
// Knobs besides the tile (conv_tile): "conv.par" 0 = (n, ob-outer, oh) fused in parallel
// (default), 1 = (n, ob-outer) in parallel with oh serial inside (declared when OH > 1, the
// stage runs in parallel and n * ob-outer > 1); "conv.order" (conv_reduce_order).
void conv_nchwc_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    te::ScheduleConfig& cfg = s.config();
    for (te::Stage& st : s.stages()) {
        if (stage_untouched(st) && st.tensor()->name == "conv_nchwc_pad") schedule_pad(st, cfg);
        if (!stage_untouched(st) || st.all_reduce_axes().empty()) continue;
        const Shape& sh = st.tensor()->shape;  // [n, ob, oh, ow, oi]
        ConvTile tile = conv_tile(cfg, sh[1], sh[3]);
        // One NHWC block of up to 1024 channels (transform_layout, where oneDNN computes most
        // convs) is no vector: fewer columns keep the accumulator tile within what lowering takes.
        const int64_t max_cols = te::Stage::kMaxLocalElems / sh[4];
        if (tile.ob * tile.t > max_cols) tile = {1, std::max<int64_t>(1, std::min(tile.t, max_cols))};
        te::IterVar obo = st.axis(1), obi;
        const bool split_ob = tile.ob > 1;
        if (split_ob) std::tie(obo, obi) = st.split(st.axis(1), tile.ob);
        te::IterVar owo, owi = st.axis(3);
        if (tile.t < sh[3]) std::tie(owo, owi) = st.split(st.axis(3), tile.t);
        std::vector<te::IterVar> order = {st.axis(0), obo, st.axis(2)};
        if (owo) order.push_back(owo);
        const bool narrow = sh[4] < vector_width(st.tensor()->dtype);  // e.g. an 8-channel block
        std::vector<te::IterVar> reduce = conv_reduce_order(cfg, st.all_reduce_axes(), narrow);
        for (const auto& r : reduce) order.push_back(r);
        if (split_ob) order.push_back(obi);
        order.push_back(owi);
        order.push_back(st.axis(4));
        st.reorder(order);
        int64_t work = assumed_numel(st.tensor());  // a symbolic batch at its assumed size
        for (const auto& r : st.all_reduce_axes()) work *= r->extent;
        const int64_t outer_blocks = assumed(sh[0]) * ((sh[1] + tile.ob - 1) / tile.ob);
        const bool par = work > kParallelMin && outer_blocks * sh[2] > 1;
        const bool rows_inside = par && sh[2] > 1 && outer_blocks > 1 && cfg.knob("conv.par", {0, 1}, 0) == 1;
        te::IterVar nb = st.fuse(st.axis(0), obo);
        te::IterVar nbh = rows_inside ? nb : st.fuse(nb, st.axis(2));
        if (split_ob) st.unroll(obi);
        if (tile.t > 1) st.unroll(owi);
        if (!narrow && tile.ob * tile.t <= 20 && sole_short_ii(reduce)) st.unroll(reduce.back());
        st.vectorize(st.axis(4));
        st.cache_write_local();
        if (par) st.parallel(nbh);
    }
    default_schedule(s, outputs);  // the bias epilogue (and fused elementwise consumers)
}

}  // namespace

void register_conv_nchwc_ops(OpRegistry& r) {
    {
        OpDef d;
        d.name = "KilnLayoutToBlocked";
        d.internal = true;
        d.attrs = {{"block", AttrKind::kInt, std::nullopt, true}, {"padded_channels", AttrKind::kInt, std::nullopt}};
        d.infer = to_blocked_infer;
        d.pattern = OpPattern::kInjective;
        d.compute = to_blocked_compute;
        d.schedule = to_blocked_schedule;
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.name = "KilnLayoutFromBlocked";
        d.internal = true;
        d.attrs = {{"channels", AttrKind::kInt, std::nullopt}};
        d.infer = from_blocked_infer;
        d.pattern = OpPattern::kInjective;
        d.compute = from_blocked_compute;
        d.schedule = from_blocked_schedule;
        r.add(std::move(d));
    }
    OpDef d;
    d.name = "KilnConv2dNCHWc";
    d.internal = true;
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = conv_window_attrs(true);
    d.infer = conv_nchwc_infer;
    d.pattern = OpPattern::kOutEWiseFusable;
    d.compute = conv_nchwc_compute;
    d.schedule = conv_nchwc_schedule;
    d.flops = [](const ir::Node& n) {  // 2 * outputs * (C/ci * KH * KW * ci)
        Shape w = n.input(1)->type().static_shape();
        double per_out = static_cast<double>(w[1] * w[2] * w[3] * w[4]);
        return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * per_out;
    };
    r.add(std::move(d));
}

}  // namespace kiln::op
