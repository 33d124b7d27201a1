// OpDef helpers and the generic CPU schedule.
//
// default_schedule: for every non-inlined stage that the op's own schedule left untouched,
//  - injective stage: fuse all data-parallel axes into one loop, split it by a vector width
//    (64 bytes of elements) and vectorize the inner loop; the outer loop runs in parallel when
//    the stage has more than kParallelMin elements;
//    knobs (one value for every such stage of the kernel): "ew.vec" the inner loop's length in
//    vector widths {1, 2, 4} (default 1; 4 where the stage reads or writes 1-byte tensors,
//    touches_bytes), "ew.par" whether the outer loop runs in parallel
//    {0, 1} (default 1, declared only for a stage large enough to run in parallel);
//    except a broadcast: when every read that is not at the stage's own index (looking through
//    inlined stages) uses only the leading axes (squeeze-and-excitation's per-channel gate
//    x[n, c, h, w] * g[n, c, 0, 0], a bias over channels), those leading axes form the outer loop
//    and the trailing ones the vectorized inner one, so the broadcast value is loop-invariant
//    there instead of a div/mod and a gather per element (RegNetY's gate: 270 us for 81K elements);
//  - reduction stage: fuse the data-parallel axes (outside the reduce loops) and run them in
//    parallel when the total work is large; reduce loops stay serial innermost.
#include "op/op_def.h"

#include <algorithm>

#include "op/schedule_util.h"
#include "support/error.h"

namespace kiln::op {

const char* op_pattern_name(OpPattern p) {
    switch (p) {
        case OpPattern::kElemWise: return "elemwise";
        case OpPattern::kBroadcast: return "broadcast";
        case OpPattern::kInjective: return "injective";
        case OpPattern::kCommReduce: return "comm_reduce";
        case OpPattern::kOutEWiseFusable: return "out_elemwise_fusable";
        case OpPattern::kTuple: return "tuple";
        case OpPattern::kOpaque: return "opaque";
    }
    return "unknown";
}

const Tensor* ComputeArgs::constant_input(size_t i) const {
    const ir::Value* v = node.input(i);
    return v != nullptr && v->is_constant() ? &v->constant() : nullptr;
}

std::vector<te::Expr> ComputeArgs::out_dims(size_t i) const {
    if (i < output_dims.size() && !output_dims[i].empty()) return output_dims[i];
    std::vector<te::Expr> dims;
    for (int64_t d : out_shape(i)) dims.push_back(te::int_imm(d));
    return dims;
}

bool stage_untouched(const te::Stage& st) {
    if (st.is_inlined() || st.writes_local() || !st.splits().empty() || !st.fuses().empty()) return false;
    for (const auto& iv : st.leaf_iter_vars())
        if (st.loop_kind(iv) != te::LoopKind::kSerial) return false;
    return true;
}

int64_t assumed_numel(const te::Tensor& t) {
    if (t->is_static()) return t->numel();
    int64_t n = 1;
    for (int64_t d : t->shape) n *= assumed(d);
    return n;
}

te::IterVar fuse_leading(te::Stage& st, int k) {
    te::IterVar f = st.axis(0);
    for (int i = 1; i < k; ++i) f = st.fuse(f, st.axis(i));
    return f;
}

int64_t vector_width(DType t) {
    int64_t w = 64 / static_cast<int64_t>(dtype_size(te::compute_dtype(t)));
    return w > 16 ? 16 : w;
}

void schedule_injective(te::Stage& st, te::ScheduleConfig& cfg, int64_t vec_default) {
    const te::Tensor& t = st.tensor();
    if (t->ndim() == 0) return;
    // Symbolic dims: one flat loop would recover each element's indices by dividing by
    // run-time extents (a 64-bit division per element); rows divide once per row.
    if (!t->is_static() && t->ndim() >= 2) return schedule_rows(st, cfg);
    te::IterVar f = st.axis(0);
    for (int i = 1; i < t->ndim(); ++i) f = st.fuse(f, st.axis(i));
    int64_t n = assumed_numel(t);
    int64_t w = vector_width(t->dtype);
    if (n <= w) {
        if (n > 1) st.vectorize(f);
        return;
    }
    w *= cfg.knob("ew.vec", {1, 2, 4}, vec_default);
    if (n <= w) {  // a longer vector loop covers the whole stage
        st.vectorize(f);
        return;
    }
    auto [outer, inner] = st.split(f, w);
    st.vectorize(inner);
    if (n > kParallelMin && cfg.knob("ew.par", {0, 1}, 1) != 0) st.parallel(outer);
}

void schedule_rows(te::Stage& st, te::ScheduleConfig& cfg) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    if (nd < 2) return schedule_injective(st, cfg);
    // Symbolic dims: a last axis of one vector or less (a channel block) is no row; the row is
    // the last two axes, so that the fused loop's indices are divided out once per row.
    const bool short_rows = !t->is_static() && nd >= 3 && t->shape[nd - 1] != te::kDynamicDim &&
                            t->shape[nd - 1] <= vector_width(t->dtype);
    te::IterVar f = fuse_leading(st, short_rows ? nd - 2 : nd - 1);
    if (assumed(t->shape[nd - 1]) > 1) st.vectorize(st.axis(nd - 1));
    if (assumed_numel(t) > kParallelMin && assumed_numel(t) / assumed(t->shape[nd - 1]) > 1)
        st.parallel(f);
}

bool schedule_channel_tiles(te::Stage& st, int64_t vectors) {
    const te::Tensor& t = st.tensor();
    const Shape& sh = t->shape;  // [n, C, ..., L]
    const int nd = t->ndim();
    const int64_t vw = vector_width(t->dtype), cw = std::min<int64_t>(vw, 8);
    if (nd < 3 || nd > 4 || assumed(sh[nd - 1]) < vw || sh[1] == te::kDynamicDim || sh[1] < cw) return false;
    // A run length that divides the axis where one near `vectors` does (2000 = 25 runs of 5
    // vectors): a tail loop's math stays scalar.
    const int64_t len = assumed(sh[nd - 1]);
    for (int64_t v : {vectors, vectors + 1, vectors - 1, vectors + 2, vectors - 2})
        if (v >= 1 && len % (v * vw) == 0) {
            vectors = v;
            break;
        }
    while (vectors > 1 && len < vectors * vw) vectors /= 2;
    auto [co, ci] = st.split(st.axis(1), cw);
    auto [lo, li] = st.split(st.axis(nd - 1), vectors * vw);
    std::vector<te::IterVar> order = {st.axis(0), co};
    if (nd == 4) order.push_back(st.axis(2));
    for (const te::IterVar& v : {lo, ci, li}) order.push_back(v);
    st.reorder(order);
    te::IterVar outer = st.fuse(st.axis(0), co);
    if (nd == 4) outer = st.fuse(outer, st.axis(2));
    st.vectorize(li);
    if (assumed_numel(t) >= kParallelMin) st.parallel(outer);  // symbolic dims: assumed sizes
    return true;
}

bool schedule_to_blocked_rows(te::Stage& st) {
    const te::Tensor& t = st.tensor();
    const Shape& sh = t->shape;  // [n, C/c, h, w, c]
    if (t->ndim() != 5 || sh[4] == te::kDynamicDim || sh[4] < 8 || assumed(sh[3]) < vector_width(t->dtype))
        return false;
    // A row that runs of 64 do not divide keeps the flat order: the split's guard and the
    // reshaped input's index (floormod by the row) stayed inside the vector loop (wav2vec's
    // GELU into blocked, [512, 3199]: 5.7 ms against ~1 flat).
    if (sh[3] == te::kDynamicDim || (sh[3] > 64 && sh[3] % 64 != 0)) return false;
    te::IterVar c = st.axis(4), w = st.axis(3);
    te::IterVar outer = st.fuse(st.fuse(st.axis(0), st.axis(1)), st.axis(2));
    // Runs of at most 64: the [run, c] tile the strided stores fill stays in L1 (a 1-D
    // signal's whole row, [512, 16], is 32 KB: 195 us for [64, 512], HiFi-GAN's).
    if (assumed(sh[3]) > 64) {
        auto [wo, wi] = st.split(w, 64);
        st.reorder({outer, wo, c, wi});
        outer = st.fuse(outer, wo);
        w = wi;
    } else {
        st.reorder({outer, c, w});
    }
    st.vectorize(w);
    if (assumed_numel(t) >= kParallelMin) st.parallel(outer);  // symbolic dims: assumed sizes
    return true;
}

void schedule_reduction(te::Stage& st) {
    const te::Tensor& t = st.tensor();
    if (t->ndim() == 0) return;
    te::IterVar f = fuse_leading(st, t->ndim());
    int64_t work = assumed_numel(t);
    for (const auto& r : st.all_reduce_axes()) work *= assumed(r->extent);
    if (assumed_numel(t) > 1 && work > kParallelMin) st.parallel(f);
}

namespace {

/// True when index `ix` at position p of a read of `t` is the reading stage's own axis `axis` (of
/// extent `extent`), or 0 on a dim of extent 1 where the axis has extent 1 too (broadcasting
/// writes a size-1 dim's index as 0; against a longer axis that is a broadcast, not the own
/// index: [1,64,56,56] + [1,64,1,1] fused flat divided each lane's index by 56 twice, 18x ORT).
bool own_index(const te::Expr& ix, const te::VarNode* axis, int64_t extent, const te::Tensor& t, size_t p) {
    if (ix.get() == axis) return true;
    return ix->kind == te::ExprKind::kIntImm && static_cast<const te::IntImmNode&>(*ix).value == 0 &&
           p < t->shape.size() && t->shape[p] == 1 && extent == 1;
}

/// The variables of a compute tensor's axes, in order.
std::vector<const te::VarNode*> axes_of(const te::Tensor& t) {
    std::vector<const te::VarNode*> axes;
    for (const te::IterVar& iv : t->axis) axes.push_back(iv->var.get());
    return axes;
}

/// Adds to `used` the positions (in `axes`) of the axis variables that `e` mentions.
void axes_in(const te::Expr& e, const std::vector<const te::VarNode*>& axes, std::vector<bool>& used) {
    using te::ExprKind;
    switch (e->kind) {
        case ExprKind::kVar:
            for (size_t k = 0; k < axes.size(); ++k) used[k] = used[k] || e.get() == axes[k];
            return;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            axes_in(n.a, axes, used);
            axes_in(n.b, axes, used);
            return;
        }
        case ExprKind::kUnary: return axes_in(static_cast<const te::UnaryNode&>(*e).a, axes, used);
        case ExprKind::kCast: return axes_in(static_cast<const te::CastNode&>(*e).a, axes, used);
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            axes_in(n.cond, axes, used);
            axes_in(n.t, axes, used);
            axes_in(n.f, axes, used);
            return;
        }
        case ExprKind::kTensorRead:
            for (const te::Expr& ix : static_cast<const te::TensorReadNode&>(*e).indices) axes_in(ix, axes, used);
            return;
        default: return;  // immediates; reductions do not occur in injective bodies
    }
}

/// True when every read in `e` walks the trailing axes axes[k..] as the inner loop may: an index
/// that mentions a trailing axis is that axis itself (at any position: a blocked layout's
/// [n, c / 16, h, w, c % 16] walks h and w with a stride), so addresses are affine in the inner
/// loop with no div/mod; other indices mention only leading axes (a broadcast: invariant in the
/// inner loop). Looks through inlined stages read at the stage's own index; another read of an
/// inlined stage must not mention trailing axes at all.
bool rows_walkable(const te::Expr& e, const std::vector<const te::VarNode*>& axes, const Shape& extents, size_t k,
                   const te::Schedule& s) {
    return te::all_reads(e, [&](const te::TensorReadNode& n) {
        bool identity = n.indices.size() == axes.size(), structured = true, mentions_trailing = false;
        for (size_t p = 0; p < n.indices.size(); ++p) {
            std::vector<bool> used(axes.size(), false);
            axes_in(n.indices[p], axes, used);
            const bool trailing = std::find(used.begin() + k, used.end(), true) != used.end();
            mentions_trailing = mentions_trailing || trailing;
            identity = identity && own_index(n.indices[p], axes[p], extents[p], n.tensor, p);
            const bool bare_trailing = std::find(axes.begin() + k, axes.end(), n.indices[p].get()) != axes.end();
            if (trailing && !bare_trailing) structured = false;
        }
        const bool inlined = s.has_stage(n.tensor) && s[n.tensor].is_inlined();
        if (inlined && identity) return rows_walkable(n.tensor->body, axes_of(n.tensor), n.tensor->shape, k, s);
        return structured && (!inlined || !mentions_trailing);
    });
}

/// True when some read of `e` (through inlined stages read at the stage's own index) is not
/// at the stage's own index: a broadcast or a transposed read. `extents` are the reading stage's:
/// a 0 on an extent-1 dim of the read tensor where the reader's dim is wider is a broadcast
/// (squeeze-and-excitation's [1, C/c, 1, 1, c] scale over [1, C/c, H, W, c]).
bool reads_elsewhere(const te::Expr& e, const std::vector<const te::VarNode*>& axes, const Shape& extents,
                     const te::Schedule& s) {
    return !te::all_reads(e, [&](const te::TensorReadNode& n) {
        bool identity = n.indices.size() == axes.size();
        for (size_t p = 0; identity && p < axes.size(); ++p)
            identity = own_index(n.indices[p], axes[p], extents[p], n.tensor, p);
        if (!identity) return false;
        if (!s.has_stage(n.tensor) || !s[n.tensor].is_inlined()) return true;
        return !reads_elsewhere(n.tensor->body, axes_of(n.tensor), n.tensor->shape, s);
    });
}

/// For a stage with a broadcast read: the most leading axes k that leave a walkable inner loop
/// (rows_walkable) of at least two vectors; 0 otherwise (plain elementwise: fuse all).
int broadcast_split(const te::Stage& st, const te::Schedule& s) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    const std::vector<const te::VarNode*> axes = axes_of(t);
    if (nd < 2 || !reads_elsewhere(t->body, axes, t->shape, s)) return 0;
    int64_t inner = 1;
    for (int k = nd - 1; k >= 1; --k) {
        inner *= assumed(t->shape[k]);
        if (inner >= 2 * vector_width(t->dtype) && rows_walkable(t->body, axes, t->shape, k, s)) return k;
    }
    return 0;
}

/// Outer loop over the leading `k` axes (parallel when large), the trailing ones fused and
/// vectorized.
void schedule_broadcast_rows(te::Stage& st, te::ScheduleConfig& cfg, int k, int64_t vec_default) {
    const te::Tensor& t = st.tensor();
    te::IterVar outer = fuse_leading(st, k);
    te::IterVar inner = st.axis(k);
    for (int i = k + 1; i < t->ndim(); ++i) inner = st.fuse(inner, st.axis(i));
    const int64_t w = vector_width(t->dtype) * cfg.knob("ew.vec", {1, 2, 4}, vec_default);
    int64_t rows = 1;
    for (int i = 0; i < k; ++i) rows *= assumed(t->shape[i]);
    if (rows > 0 && assumed_numel(t) / rows > w) inner = st.split(inner, w).second;  // rows = 0: an empty tensor
    st.vectorize(inner);
    if (assumed_numel(t) > kParallelMin && rows > 1 && cfg.knob("ew.par", {0, 1}, 1) != 0) st.parallel(outer);
}

/// True when `e` contains a floordiv or floormod.
bool has_divmod(const te::Expr& e) {
    using te::ExprKind;
    switch (e->kind) {
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            if (n.op == te::BinaryOp::kFloorDiv || n.op == te::BinaryOp::kFloorMod) return true;
            return has_divmod(n.a) || has_divmod(n.b);
        }
        case ExprKind::kUnary: return has_divmod(static_cast<const te::UnaryNode&>(*e).a);
        case ExprKind::kCast: return has_divmod(static_cast<const te::CastNode&>(*e).a);
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            return has_divmod(n.cond) || has_divmod(n.t) || has_divmod(n.f);
        }
        default: return false;
    }
}

/// True when some read of `e` (through inlined stages) indexes with floordiv/floormod: a
/// Reshape/Flatten/Transpose chain (ShuffleNet's channel shuffle), written over the flat index.
bool reads_through_divmod(const te::Expr& e, const te::Schedule& s) {
    return !te::all_reads(e, [&](const te::TensorReadNode& n) {
        for (const te::Expr& ix : n.indices)
            if (has_divmod(ix)) return false;
        if (s.has_stage(n.tensor) && s[n.tensor].is_inlined()) return !reads_through_divmod(n.tensor->body, s);
        return true;
    });
}

/// For a stage reading through reshape index arithmetic: the most leading axes k whose trailing
/// extent still fills two vectors (0: none). Flattening every axis into one vectorized loop (the
/// injective schedule) leaves each lane its own chain of div/mod by the reshaped extents; keeping
/// the leading axes as loops of their own lets the simplifier fold that arithmetic (its ranges
/// are known) into affine addresses the inner loop walks (ShuffleNetV2's Slice+Concat+Reshape+
/// Transpose+Reshape kernels ran at 30 ns per element).
int reshape_rows_split(const te::Stage& st, const te::Schedule& s) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    if (nd < 2 || !reads_through_divmod(t->body, s)) return 0;
    int64_t inner = 1;
    for (int k = nd - 1; k >= 1; --k) {
        inner *= assumed(t->shape[k]);
        if (inner >= 2 * vector_width(t->dtype)) return k;
    }
    return 0;
}

/// True when `e` uses an axis variable as a value (not only as the index of a read): an average
/// pool's divisor counts the window cells inside the image from the output position. Fused flat,
/// each lane recovers its position with divisions.
bool computes_with_axes(const te::Expr& e, const std::vector<const te::VarNode*>& axes) {
    using te::ExprKind;
    switch (e->kind) {
        case ExprKind::kVar: return std::find(axes.begin(), axes.end(), e.get()) != axes.end();
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            return computes_with_axes(n.a, axes) || computes_with_axes(n.b, axes);
        }
        case ExprKind::kUnary: return computes_with_axes(static_cast<const te::UnaryNode&>(*e).a, axes);
        case ExprKind::kCast: return computes_with_axes(static_cast<const te::CastNode&>(*e).a, axes);
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            return computes_with_axes(n.cond, axes) || computes_with_axes(n.t, axes) || computes_with_axes(n.f, axes);
        }
        default: return false;  // reads (their indices are reads_elsewhere's), immediates
    }
}

/// For a stage that reads elsewhere than its own index in a way the inner loop cannot walk
/// (Pad's and Concat's clamped indices, Resize's computed coordinates) or computes with its
/// position (computes_with_axes): whether its last axis is long enough to be a loop of its own. Flattening every axis recomputes each lane's row from the
/// flat index with 64-bit divisions (Pad of [1,64,56,56] ran 14x ONNX Runtime, Resize 15x);
/// row loops leave the row's part of every index to the outer loop.
bool gathers_rows(const te::Stage& st, const te::Schedule& s) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    if (nd < 2 || assumed(t->shape[nd - 1]) < 8 || assumed_numel(t) / assumed(t->shape[nd - 1]) <= 1) return false;
    const std::vector<const te::VarNode*> axes = axes_of(t);
    return reads_elsewhere(t->body, axes, t->shape, s) || computes_with_axes(t->body, axes);
}

/// True when the stage writes or reads (through inlined stages) a 1-byte tensor: a QDQ chain's
/// u8/s8 values. GCC sizes a loop's vectors by its narrowest type, so a 16-lane loop of floats
/// that loads or stores bytes runs on 16-byte vectors (4 floats each); 64 lanes fill AVX-512.
bool touches_bytes(const te::Tensor& t, const te::Schedule& s) {
    if (dtype_size(t->dtype) == 1) return true;
    return !te::all_reads(t->body, [&](const te::TensorReadNode& n) {
        if (dtype_size(n.tensor->dtype) == 1) return false;
        return !(s.has_stage(n.tensor) && s[n.tensor].is_inlined() && touches_bytes(n.tensor, s));
    });
}

/// True when `e` reads (through inlined stages) the blocked-to-plain transpose
/// (KilnLayoutFromBlocked): a fused group after a blocked conv that reshapes or concatenates its
/// output (a detector's heads: conv -> flatten -> concat -> sigmoid).
bool reads_from_blocked(const te::Expr& e, const te::Schedule& s) {
    return !te::all_reads(e, [&](const te::TensorReadNode& n) {
        if (!s.has_stage(n.tensor) || !s[n.tensor].is_inlined()) return true;
        return n.tensor->name != "KilnLayoutFromBlocked" && !reads_from_blocked(n.tensor->body, s);
    });
}

/// True when `e` only moves values (through inlined stages): reads, selects (padding) and
/// casts, no arithmetic.
bool moves_only(const te::Expr& e, const te::Schedule& s, int depth = 0) {
    if (depth > 64) return false;
    switch (e->kind) {
        case te::ExprKind::kIntImm:
        case te::ExprKind::kFloatImm: return true;
        case te::ExprKind::kCast: return moves_only(static_cast<const te::CastNode&>(*e).a, s, depth + 1);
        case te::ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            return moves_only(n.t, s, depth + 1) && moves_only(n.f, s, depth + 1);
        }
        case te::ExprKind::kTensorRead: {
            const auto& n = static_cast<const te::TensorReadNode&>(*e);
            return !(s.has_stage(n.tensor) && s[n.tensor].is_inlined()) || moves_only(n.tensor->body, s, depth + 1);
        }
        default: return false;
    }
}

}  // namespace

void default_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st)) continue;
        if (st.all_reduce_axes().empty()) {
            // "ew.vec" 4 where bytes are touched: 64 lanes (touches_bytes).
            const int64_t vec = vector_width(st.tensor()->dtype) == 16 && touches_bytes(st.tensor(), s) ? 4 : 1;
            // Channel tiles first: a row of the flat order reads one float per blocked cache
            // line (YOLO's heads, [1, 255, 2000]: 2.8 ns an element, 20% of the model). Rows of
            // four vectors: GCC unrolls a loop of one vector whole and then leaves the strided
            // loads and the math after them (the heads' sigmoid) scalar.
            if (reads_from_blocked(st.tensor()->body, s) && schedule_channel_tiles(st, 4)) continue;
            // Elementwise math fused into the transpose to blocked (GroupNorm -> SiLU -> conv):
            // the flat order vectorizes the channel lanes, 16 reads a plane apart (4 KB apart
            // for 32x32 planes: one L1 set), 8 ns an element for SD's [320, 32, 32].
            // (A plain copy keeps the flat order: Reshape+KilnLayoutToBlocked of TCN's 1-D
            // signal took 21 us flat, 39 as rows.)
            if (st.tensor()->name == "KilnLayoutToBlocked" && !moves_only(st.tensor()->body, s) &&
                schedule_to_blocked_rows(st))
                continue;
            if (int k = broadcast_split(st, s)) schedule_broadcast_rows(st, s.config(), k, vec);
            else if (int r = reshape_rows_split(st, s)) schedule_broadcast_rows(st, s.config(), r, vec);
            else if (gathers_rows(st, s)) schedule_rows(st, s.config());
            else schedule_injective(st, s.config(), vec);
        } else
            schedule_reduction(st);
    }
}

}  // namespace kiln::op
