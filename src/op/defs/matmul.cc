// MatMul (numpy semantics: 1-D operands are promoted then the added dim removed; batch dims
// broadcast) and Gemm (Y = alpha * A' * B' + beta * C, C unidirectionally broadcast to [M, N]).
//
// Compute: a sum-reduction stage over k (in the compute dtype), then an epilogue stage when
// alpha/beta/C or a narrower storage dtype need one.
// Schedule: a register-tiled micro-kernel (schedule_matmul_stage): an mr x nc output tile
// accumulates in registers across the whole k loop (FMA: broadcast A, contiguous B vectors)
// and is written once.
// MatMul's core (matmul_output_dims, matmul_accumulate) and schedule are shared with
// MatMulInteger and QLinearMatMul (linear_util.h).
// Gradients: matmul_grad, gemm_grad (the formulas are at each).
#include <algorithm>
#include <string>

#include "op/broadcast.h"
#include "op/defs/linear_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

std::vector<DType> matmul_types() {
    std::vector<DType> t = float_types();
    for (DType s : {DType::kInt32, DType::kInt64, DType::kUInt32, DType::kUInt64}) t.push_back(s);
    return t;
}

// The register tile of the micro-kernel: mr output rows x nr vectors of output columns, each
// a vector accumulator; at most 24 of the 32 AVX-512 registers (the rest hold nr B vectors and
// an A broadcast). Picks the shape with the best FMAs per load (mr*nr / (mr+nr)) after the
// waste of a tail in M or N.
struct MatmulTile {
    int64_t mr, nc;  // rows, columns (nr * vector width)
};

/// FMAs per load of an mr x nc tile (nr vectors) after the waste of partial tiles at m x n.
double tile_score(int64_t m, int64_t n, int64_t mr, int64_t nc, int64_t nr) {
    const double useful = static_cast<double>(m) / static_cast<double>((m + mr - 1) / mr * mr) *
                          static_cast<double>(n) / static_cast<double>((n + nc - 1) / nc * nc);
    return useful * static_cast<double>(mr * nr) / static_cast<double>(mr + nr);
}

/// A candidate tile and the vector count its score is taken at: with fixed columns, the first
/// nr of the descent within the accumulator limit (the scoring the static kernels were tuned
/// with; scoring at nc / vec instead made 8 x 64 packed tiles win, 32 accumulators that spill:
/// GPT-2's products ran 1.3x slower).
struct TileCandidate {
    MatmulTile tile;
    int64_t nr;
};

/// The candidate tiles in preference order (more rows, then more columns, first).
std::vector<TileCandidate> tile_candidates(int64_t m, int64_t n, int64_t vec, int64_t fixed_nc) {
    std::vector<TileCandidate> out;
    const int64_t max_nr = fixed_nc > 0 ? (fixed_nc + vec - 1) / vec
                                        : std::max<int64_t>(1, std::min<int64_t>(4, (n + vec - 1) / vec));
    for (int64_t mr = std::min<int64_t>(8, m); mr >= 1; --mr)
        for (int64_t nr = max_nr; nr >= 1; --nr) {
            if (mr * nr > 24 && mr > 1) continue;
            out.push_back({{mr, fixed_nc > 0 ? fixed_nc : nr * vec}, nr});
            if (fixed_nc > 0) break;
        }
    return out;
}

/// fixed_nc > 0: the columns are given (a packed B's block), only mr is chosen.
MatmulTile static_matmul_tile(int64_t m, int64_t n, int64_t vec, int64_t fixed_nc) {
    MatmulTile best{1, fixed_nc > 0 ? fixed_nc : vec};
    double best_score = -1;
    for (const TileCandidate& c : tile_candidates(m, n, vec, fixed_nc)) {
        const double score = tile_score(m, n, c.tile.mr, c.tile.nc, c.nr);
        if (score > best_score + 1e-9) best_score = score, best = c.tile;
    }
    return best;
}

/// As static_matmul_tile; with symbolic rows (sym_m) or columns (sym_n), m and n their assumed
/// sizes, the tile whose worst loss against the static kernel's own best tile, over the lengths
/// models see most (powers of two, 8 to 256; both dims at once when both are symbolic, as the
/// attention's [s, s] scores), is least. At the one assumed size (128) a 6 x 64 tile scored
/// best, and every power-of-two length then ran partial tiles (the attention scores at seq 16
/// computed a quarter of a 64-column tile: 3x the static kernel's time).
MatmulTile matmul_tile(int64_t m, int64_t n, int64_t vec, int64_t fixed_nc = 0, bool sym_m = false,
                       bool sym_n = false) {
    if (!sym_m && !sym_n) return static_matmul_tile(m, n, vec, fixed_nc);
    MatmulTile best{1, fixed_nc > 0 ? fixed_nc : vec};
    double best_regret = 1e30;
    for (const TileCandidate& c : tile_candidates(m, n, vec, fixed_nc)) {
        const MatmulTile& t = c.tile;
        double regret = 0;
        for (int64_t len = 8; len <= 256; len *= 2) {
            const int64_t ml = sym_m ? len : m, nl = sym_n ? len : n;
            const MatmulTile own = static_matmul_tile(ml, nl, vec, fixed_nc);
            const double ideal = tile_score(ml, nl, own.mr, own.nc, (own.nc + vec - 1) / vec);
            regret = std::max(regret, ideal / tile_score(ml, nl, t.mr, t.nc, (t.nc + vec - 1) / vec));
        }
        if (regret < best_regret - 1e-9) best_regret = regret, best = t;
    }
    return best;
}

/// The most multiply-adds one iteration of a preemptible matmul's parallel loop should hold
/// before its row tiles join the parallel loop (te::ScheduleConfig::preemptible: a preempted
/// run stops only between a loop's iterations, runtime/thread_pool.h), so this bounds how long a
/// stop waits inside a matmul (4 M: ~30 us at one core's ~130 G multiply-adds/s, AVX-512).
/// Fusing the row tiles costs speed (a guard inside the tile where M is no multiple of its rows,
/// less reuse of a column tile's B panel): BERT-base took 3.5% longer at 2 threads with every
/// product split, so sessions that are not preempted keep their column tiles.
constexpr int64_t kMaxParallelIterationWork = int64_t{1} << 22;

// The next column tile's panel of a packed B ([N/nb, K, nb]), fetched into L2 while this tile
// computes, spread evenly over its row tiles: step s = io * K + k of the tile prefetches line
// floor(s / r) of panel jo + 1 (its row k' = line / lines, its (line mod lines)-th cache line),
// r = row_tiles / lines steps per line, so the panel arrives at the rate the tile computes.
// Without it the first row tile of each column tile read its panel from memory at the FMA
// rate: BERT-style FFN products whose weights stream from memory (12 layers, 226 MB) ran at
// 226-235 GFLOP/s against 275-315 with the weights in L3.
void prefetch_next_panel(te::Stage& st, const te::Tensor& bp, const te::IterVar& jo, const te::IterVar& io,
                         const te::IterVar& k, int64_t row_tiles) {
    const int64_t panels = bp->shape[0], K = bp->shape[1], nb = bp->shape[2];
    const int64_t elem = static_cast<int64_t>(dtype_size(bp->dtype)), lines = std::max<int64_t>(1, nb * elem / 64);
    if (panels < 2 || row_tiles < lines) return;
    const int64_t r = row_tiles / lines;
    Expr line = te::floordiv(Expr(io->var) * te::int_imm(K) + Expr(k->var), te::int_imm(r));
    Expr next = te::min(Expr(jo->var) + te::int_imm(1), te::int_imm(panels - 1));
    Expr row = te::min(te::floordiv(line, te::int_imm(lines)), te::int_imm(K - 1));
    Expr col = te::floormod(line, te::int_imm(lines)) * te::int_imm(64 / elem);
    st.prefetch(bp, k, {next, row, col});
}

// Schedules a [rows..., i, j] x [k] reduction stage as a register-tiled micro-kernel:
// (rows, j-outer) fused and parallel, i-outer, then k, then the mr x nc tile (i-inner unrolled,
// j-inner vectorized) accumulated in a local array (Stage::cache_write_local) and written
// once. Every k step broadcasts mr values of A against nc/vec contiguous vectors of B's row k.
// With a packed B (`packed_b`, its block the tile's columns) every k step also prefetches a line
// of the next column tile's panel (prefetch_next_panel).
//
// Knobs (default: matmul_tile's choice and the loop structure above):
//  - "matmul.nr": the tile's columns in vectors, 1..4 up to N's (declared when the columns are
//    not fixed by a packed B and N spans more than one vector);
//  - "matmul.mr": the tile's rows, {1, 2, 3, 4, 6, 8} up to M with mr * nr <= 24 accumulators
//    (declared when M > 1);
//  - "matmul.ku": the k loop split by ku with the inner part unrolled, ku in {1, 2, 4} dividing
//    K (declared when K >= 8 and even);
//  - "matmul.par": which loops run in parallel: 0 = (rows, j-outer) with i-outer serial inside
//    (default; 2 where (rows, j-outer) has fewer iterations than the threads the kernel will run
//    on, above 2 threads, or, in a preemptible kernel, where one of its iterations holds more
//    than kMaxParallelIterationWork multiply-adds), 1 = (rows, i-outer) with j-outer serial inside,
//    2 = (rows, j-outer, i-outer) fused (declared when the stage runs in parallel and i-outer
//    has more than one iteration).
void schedule_matmul_stage(te::Stage& st, te::ScheduleConfig& cfg, int64_t fixed_nc = 0,
                           const te::Tensor& packed_b = nullptr) {
    const int nd = st.tensor()->ndim();
    if (nd == 0) return;
    const Shape& sh = st.tensor()->shape;
    te::IterVar j = st.axis(nd - 1);
    if (nd == 1) {  // a vector result: k outer, j vectorized (no rows to tile)
        std::vector<te::IterVar> order(st.all_reduce_axes().begin(), st.all_reduce_axes().end());
        order.push_back(j);
        st.reorder(order);
        if (assumed(sh[0]) > 1) st.vectorize(j);
        return;
    }
    const int64_t vec = vector_width(st.tensor()->dtype);
    const int64_t m = assumed(sh[nd - 2]), n = assumed(sh[nd - 1]);
    const bool sym_rows = sh[nd - 2] == te::kDynamicDim, sym_cols = sh[nd - 1] == te::kDynamicDim;
    MatmulTile tile = matmul_tile(m, n, vec, fixed_nc, sym_rows, sym_cols);
    int64_t nr = (tile.nc + vec - 1) / vec;
    if (fixed_nc == 0 && n > vec) {
        std::vector<int64_t> nrs;
        for (int64_t c = 1; c <= std::min<int64_t>(4, (n + vec - 1) / vec); ++c) nrs.push_back(c);
        nr = cfg.knob("matmul.nr", nrs, nr);
        if (nr * vec != tile.nc) tile = matmul_tile(m, n, vec, nr * vec, sym_rows, sym_cols);  // the best rows for those columns
    }
    if (m > 1) {
        std::vector<int64_t> mrs;
        for (int64_t c : {1, 2, 3, 4, 6, 8})
            if (c <= m && c * nr <= 24) mrs.push_back(c);
        tile.mr = cfg.knob("matmul.mr", mrs, tile.mr);
    }
    auto [io, ii] = st.split(st.axis(nd - 2), tile.mr);
    auto [jo, ji] = st.split(j, tile.nc);
    std::vector<te::IterVar> reduce = st.all_reduce_axes();
    te::IterVar k_unrolled;
    if (reduce.size() == 1 && reduce[0]->extent >= 8) {
        std::vector<int64_t> kus;
        for (int64_t c : {1, 2, 4})
            if (reduce[0]->extent % c == 0) kus.push_back(c);
        const int64_t ku = kus.size() > 1 ? cfg.knob("matmul.ku", kus, 1) : 1;
        if (ku > 1) {
            auto [ko, ki] = st.split(reduce[0], ku);
            reduce = {ko, ki};
            k_unrolled = ki;
        }
    }
    int64_t work = assumed_numel(st.tensor());
    for (const auto& r : st.all_reduce_axes()) work *= assumed(r->extent);
    const int64_t io_extent = (m + tile.mr - 1) / tile.mr;
    // Symbolic rows or columns (docs/dynamic_shapes.md): a split of a symbolic extent is peeled
    // into full tiles and a tail only as a loop of its own; fused into the parallel loop its
    // guard would sit inside the vectorized tile (the attention's [b, h, s, s] scores ran 4x
    // slower so). The parallel loop then fuses the static split, or only the batch dims.
    const bool sym_m = sh[nd - 2] == te::kDynamicDim, sym_n = sh[nd - 1] == te::kDynamicDim;
    int64_t par_mode = 0;
    if (sym_n && !sym_m) par_mode = 1;
    else if (work > kParallelMin && io_extent > 1 && !sym_m && !sym_n) {
        // Fewer (batch x column tile) chunks than threads: row tiles join the parallel loop
        // (BERT-base's 768-wide projections have 12 column tiles: 12 of 16 threads busy). A
        // thread's run of chunks stays within one column tile, so its B panel is still reused.
        int64_t col_chunks = (n + tile.nc - 1) / tile.nc;
        for (int d = 0; d < nd - 2; ++d) col_chunks *= assumed(sh[d]);
        // In a preemptible kernel row tiles also join where one (batch x column tile) chunk is
        // long: an iteration of BERT-base's 3072-deep FFN output projection (25 M multiply-adds,
        // ~0.2 ms) held a preemption that long, one of its 768-deep ones (6 M) ~50 us; a row
        // tile of them is 0.3-1.2 M.
        const bool long_chunks = cfg.preemptible() && work / col_chunks > kMaxParallelIterationWork;
        const int64_t par_default = (cfg.threads() > 2 && col_chunks < cfg.threads()) || long_chunks ? 2 : 0;
        par_mode = cfg.knob("matmul.par", {0, 1, 2}, par_default);
    }
    const bool fuse_leaf = !(par_mode == 1 ? sym_m : sym_n);
    std::vector<te::IterVar> order;
    for (int d = 0; d < nd - 2; ++d) order.push_back(st.axis(d));
    if (par_mode == 1) {
        order.push_back(io);
        order.push_back(jo);
    } else {
        order.push_back(jo);
        order.push_back(io);
    }
    for (const auto& r : reduce) order.push_back(r);
    order.push_back(ii);
    order.push_back(ji);
    st.reorder(order);
    te::IterVar outer = par_mode == 1 ? io : jo;
    if (fuse_leaf || nd == 2) {
        for (int d = nd - 3; d >= 0; --d) outer = st.fuse(st.axis(d), outer);
    } else {
        outer = st.axis(nd - 3);
        for (int d = nd - 4; d >= 0; --d) outer = st.fuse(st.axis(d), outer);
    }
    if (par_mode == 2) outer = st.fuse(outer, io);
    if (k_unrolled) st.unroll(k_unrolled);
    if (packed_b && !k_unrolled && reduce.size() == 1 && !sym_m && !sym_n)
        prefetch_next_panel(st, packed_b, jo, io, reduce[0], io_extent);
    if (tile.mr > 1) st.unroll(ii);
    if (n > 1) st.vectorize(ji);
    st.cache_write_local();
    if (work > kParallelMin && assumed(outer->extent) > 1) st.parallel(outer);
}

void matmul_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages())
        if (stage_untouched(st) && !st.all_reduce_axes().empty()) schedule_matmul_stage(st, s.config());
    default_schedule(s, outputs);
}

// Adds a cast-to-storage stage when the accumulation dtype differs from the output's.
te::Tensor narrow_if_needed(const te::Tensor& acc, DType out_dtype, const std::string& name) {
    if (acc->dtype == out_dtype) return acc;
    return te::compute(
        acc->shape, [&](const std::vector<Var>& i) { return te::read(acc, i); }, name, out_dtype);
}

OpDef matmul_op() {
    OpDef d;
    d.name = "MatMul";
    d.onnx_versions = {1, 9, 13};
    d.min_inputs = d.max_inputs = 2;
    d.pattern = OpPattern::kOutEWiseFusable;
    d.flops = [](const ir::Node& n) {  // 2 * outputs * K (K: A's last dim)
        Shape a = n.input(0)->type().static_shape();
        double k = a.empty() ? 1.0 : static_cast<double>(a.back());
        return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * k;
    };
    d.infer = [](const ir::Node& n) {
        const auto& a = input_type(n, 0, "A");
        const auto& b = input_type(n, 1, "B");
        check_dtype(n, "A", a.dtype, matmul_types());
        check_same_dtype(n, "A", a.dtype, "B", b.dtype);
        return std::vector<ir::TensorType>{{a.dtype, matmul_output_dims(n, a, b)}};
    };
    d.compute = [](const ComputeArgs& args) {
        const DType cdt = te::compute_dtype(args.out_dtype());
        te::Tensor acc = matmul_accumulate(args.in(0), args.in(1), args.out_dims(), cdt,
                                           cdt == args.out_dtype() ? "MatMul" : "matmul_acc");
        return std::vector<te::Tensor>{narrow_if_needed(acc, args.out_dtype(), "MatMul")};
    };
    d.schedule = matmul_schedule;
    return d;
}

struct GemmDims {
    int64_t m, k, n;
};

GemmDims gemm_dims(const ir::Node& n, const std::vector<ir::Dim>& a, const std::vector<ir::Dim>& b) {
    KILN_CHECK(a.size() == 2 && b.size() == 2, kInvalidModel)
        << node_label(n) << ": inputs A and B must have rank 2, got " << dims_str(a) << " and " << dims_str(b);
    const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
    GemmDims g;
    g.m = static_dim(n, a[ta ? 1 : 0], "A");
    g.k = static_dim(n, a[ta ? 0 : 1], "A");
    int64_t kb = static_dim(n, b[tb ? 1 : 0], "B");
    g.n = static_dim(n, b[tb ? 0 : 1], "B");
    KILN_CHECK(g.k == kb, kInvalidModel) << node_label(n) << ": inner dimensions differ: A' has K=" << g.k
                                         << " but B' has K=" << kb << " (transA=" << ta << ", transB=" << tb << ")";
    return g;
}

OpDef gemm_op() {
    OpDef d;
    d.name = "Gemm";
    d.onnx_versions = {1, 6, 7, 9, 11, 13};
    d.flops = [](const ir::Node& n) {  // 2 * M * N * K
        Shape a = n.input(0)->type().static_shape();
        double k = a.size() == 2 ? static_cast<double>(n.attr_int("transA", 0) ? a[0] : a[1]) : 1.0;
        return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * k;
    };
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"alpha", AttrKind::kFloat, ir::Attr(1.0)},
               {"beta", AttrKind::kFloat, ir::Attr(1.0)},
               {"transA", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"transB", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kOutEWiseFusable;
    d.infer = [](const ir::Node& n) {
        const auto& a = input_type(n, 0, "A");
        const auto& b = input_type(n, 1, "B");
        check_dtype(n, "A", a.dtype, matmul_types());
        check_same_dtype(n, "A", a.dtype, "B", b.dtype);
        // M may be a symbolic dim (a symbolic compile's batch: a classifier head); K and N not.
        const ir::Dim m = a.rank() == 2 ? a.shape[n.attr_int("transA", 0) != 0 ? 1 : 0] : ir::Dim(1);
        std::vector<ir::Dim> as = a.shape;
        if (as.size() == 2 && !m.is_static()) as[n.attr_int("transA", 0) != 0 ? 1 : 0] = ir::Dim(1);
        GemmDims g = gemm_dims(n, as, b.shape);
        if (has_input(n, 2)) {
            const auto& c = n.input(2)->type();
            check_same_dtype(n, "A", a.dtype, "C", c.dtype);
            std::vector<ir::Dim> mn = {m, g.n};
            bool ok = c.rank() <= 2;  // unidirectional: each C dim is 1 or the output's
            for (int i = 0; ok && i < c.rank(); ++i) {
                const ir::Dim& d = c.shape[i];
                ok = d == mn[2 - c.rank() + i] || (d.is_static() && d.value == 1);
            }
            KILN_CHECK(ok, kInvalidModel)
                << node_label(n) << ": C of shape " << dims_str(c.shape) << " does not broadcast to " << dims_str(mn);
        }
        return std::vector<ir::TensorType>{{a.dtype, {m, g.n}}};
    };
    d.compute = [](const ComputeArgs& args) {
        te::Tensor a = args.in(0), b = args.in(1);
        const bool ta = args.node.attr_int("transA", 0) != 0, tb = args.node.attr_int("transB", 0) != 0;
        const double alpha = args.node.attr_float("alpha", 1.0), beta = args.node.attr_float("beta", 1.0);
        const DType cdt = te::compute_dtype(args.out_dtype());
        GemmDims g = gemm_dims(args.node, to_dims(a->shape), to_dims(b->shape));
        te::IterVar k = te::reduce_axis(g.k, "k");
        te::Tensor c = args.has_input(2) && beta != 0.0 ? args.in(2) : nullptr;
        const bool epilogue = c || alpha != 1.0 || cdt != args.out_dtype();
        te::Tensor acc = te::compute(
            {g.m, g.n}, [&](const std::vector<Var>& i) {
                Expr av = ta ? te::read(a, {Expr(k->var), Expr(i[0])}) : te::read(a, {Expr(i[0]), Expr(k->var)});
                Expr bv = tb ? te::read(b, {Expr(i[1]), Expr(k->var)}) : te::read(b, {Expr(k->var), Expr(i[1])});
                return te::sum(av * bv, {k});
            },
            epilogue ? "gemm_acc" : "Gemm", cdt);
        if (!epilogue) return std::vector<te::Tensor>{acc};
        te::Tensor out = te::compute(
            {g.m, g.n}, [&](const std::vector<Var>& i) {
                Expr v = te::read(acc, i);
                if (alpha != 1.0) v = v * te::make_const(cdt, alpha);
                if (c) {
                    Expr cv = broadcast_read(c, i);
                    v = v + (beta != 1.0 ? cv * te::make_const(cdt, beta) : cv);
                }
                return v;
            },
            "Gemm", args.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.schedule = matmul_schedule;
    return d;
}

// KilnMatMulPackedB (internal; pack_matmul_weights writes it for a MatMul or Gemm whose B is
// a constant): Y[..., i, j] = alpha * sum_k A[..., i, k] * Bp[j / nb, k, j % nb] + beta * C,
// with Bp[N/nb, K, nb] the packed B (Bp[jb, k, jj] = B'[k, jb*nb + jj]) and C (optional)
// broadcast to Y as numpy does. The micro-kernel's nc is nb, so each k step reads nb
// contiguous floats and the panel of one column block is contiguous over all of k.
std::vector<ir::TensorType> packed_infer(const ir::Node& n) {
    const auto& a = input_type(n, 0, "A");
    const auto& b = input_type(n, 1, "Bp");
    check_dtype(n, "A", a.dtype, {DType::kFloat32});
    check_same_dtype(n, "A", a.dtype, "Bp", b.dtype);
    KILN_CHECK(a.rank() >= 2 && b.rank() == 3, kInvalidModel)
        << node_label(n) << ": A must have rank >= 2 and Bp rank 3, got " << dims_str(a.shape) << " and "
        << dims_str(b.shape);
    Shape bs = b.static_shape();
    const int64_t cols = n.attr_int("n", 0);
    KILN_CHECK(a.shape[a.rank() - 1] == ir::Dim(bs[1]) && cols > (bs[0] - 1) * bs[2] && cols <= bs[0] * bs[2],
               kInvalidModel)
        << node_label(n) << ": A " << dims_str(a.shape) << ", Bp " << dims_str(b.shape) << " and n=" << cols
        << " disagree";
    std::vector<ir::Dim> out(a.shape.begin(), a.shape.end() - 1);
    out.push_back(cols);
    if (has_input(n, 2)) {
        const auto& c = n.input(2)->type();
        check_same_dtype(n, "A", a.dtype, "C", c.dtype);
        bool ok = c.rank() <= static_cast<int>(out.size());
        for (int i = 0; ok && i < c.rank(); ++i) {
            const ir::Dim& d = c.shape[i];
            ok = d == out[out.size() - c.rank() + i] || (d.is_static() && d.value == 1);
        }
        KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": C of shape " << dims_str(c.shape)
                                      << " does not broadcast to " << dims_str(out);
    }
    return {{a.dtype, out}};
}

std::vector<te::Tensor> packed_compute(const ComputeArgs& args) {
    const te::Tensor& a = args.in(0);
    const te::Tensor& bp = args.in(1);
    const int64_t nb = bp->shape[2];
    const double alpha = args.node.attr_float("alpha", 1.0), beta = args.node.attr_float("beta", 1.0);
    const te::Tensor c = args.has_input(2) && beta != 0.0 ? args.in(2) : nullptr;
    const bool epilogue = c || alpha != 1.0;
    const std::vector<Expr> out = args.out_dims();
    const int ra = a->ndim();
    te::IterVar k = te::reduce_axis(a->shape[ra - 1], "k");
    te::Tensor acc = te::sym_compute(
        out, [&](const std::vector<Var>& i) {
            std::vector<Expr> ai(i.begin(), i.end() - 1);
            ai.push_back(k->var);
            Expr j = i.back();
            Expr bv = te::read(bp, {te::floordiv(j, te::int_imm(nb)), Expr(k->var), te::floormod(j, te::int_imm(nb))});
            return te::sum(te::read(a, ai) * bv, {k});
        },
        epilogue ? "packed_matmul_acc" : "KilnMatMulPackedB", DType::kFloat32);
    if (!epilogue) return {acc};
    return {te::sym_compute(
        out, [&](const std::vector<Var>& i) {
            Expr v = te::read(acc, i);
            if (alpha != 1.0) v = v * te::make_const(DType::kFloat32, alpha);
            if (c) {
                Expr cv = broadcast_read(c, i);
                v = v + (beta != 1.0 ? cv * te::make_const(DType::kFloat32, beta) : cv);
            }
            return v;
        },
        "KilnMatMulPackedB", DType::kFloat32)};
}

void packed_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st) || st.all_reduce_axes().empty()) continue;
        int64_t nb = 0;  // the packed operand's block: the tile's columns
        te::Tensor bp;
        for (const te::Tensor& in : st.tensor()->inputs())
            if (in->ndim() == 3 && in->is_placeholder) nb = in->shape[2], bp = in;
        const bool fixed = nb > 0 && nb <= 64;
        schedule_matmul_stage(st, s.config(), fixed ? nb : 0, fixed ? bp : te::Tensor());
    }
    default_schedule(s, outputs);
}

OpDef packed_op() {
    OpDef d;
    d.name = "KilnMatMulPackedB";
    d.internal = true;
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"n", AttrKind::kInt, std::nullopt, true},
               {"alpha", AttrKind::kFloat, ir::Attr(1.0)},
               {"beta", AttrKind::kFloat, ir::Attr(1.0)}};
    d.pattern = OpPattern::kOutEWiseFusable;
    d.flops = [](const ir::Node& n) {  // 2 * outputs * K
        Shape b = n.input(1)->type().static_shape();
        return 2.0 * static_cast<double>(shape_numel(n.output(0)->type().static_shape())) * static_cast<double>(b[1]);
    };
    d.infer = packed_infer;
    d.compute = packed_compute;
    d.schedule = packed_schedule;
    return d;
}

// ---- gradients (op/gradient.h) ----

using Grads = std::vector<ir::Value*>;

// The last two dims of v swapped (a Transpose; rank >= 2).
ir::Value* swap_last(GradientBuilder& b, ir::Value* v) {
    const int r = v->type().rank();
    std::vector<int64_t> perm(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) perm[i] = i;
    std::swap(perm[r - 2], perm[r - 1]);
    return b.emit1("Transpose", {v}, {{"perm", perm}});
}

// Y = A B with A batched [..., M, K] and B one matrix [K, N] shared by every batch (a linear
// layer on [batch, seq, features]): the batch folds into M, so both gradients are single Gemms
// over [prod(batch) * M] rows. dB = A_flat^T G_flat reduces the batch inside the GEMM (no
// per-batch [K, N] products summed by a ReduceSum), dA = G_flat B^T reads B through the trans
// flag (no Transpose of B): BERT's 768x3072 weight gradients were 8 batched products, a
// ReduceSum and two Transposes each.
Grads matmul_grad_shared_b(GradientBuilder& b, ir::Value* a2, ir::Value* b2, ir::Value* g2, const Shape& as,
                           const Shape& bs) {
    const Shape as2 = a2->type().static_shape(), gs2 = g2->type().static_shape();
    const int64_t rows = shape_numel(as2) / as2.back();
    ir::Value* g_flat = b.reshape(g2, {rows, gs2.back()});
    Grads out(2, nullptr);
    if (b.needs_grad(0)) out[0] = b.reshape(b.emit1("Gemm", {g_flat, b2}, {{"transB", int64_t{1}}}), as);
    if (b.needs_grad(1))
        out[1] = b.reshape(b.emit1("Gemm", {b.reshape(a2, {rows, as2.back()}), g_flat}, {{"transA", int64_t{1}}}), bs);
    return out;
}

// Y = A B with numpy promotion: a 1-D A is [1, K], a 1-D B is [K, 1] (the added dim is dropped
// from Y). With A2, B2 the promoted operands and G2 the gradient in Y2's shape:
//   dA2 = G2 B2^T,  dB2 = A2^T G2,
// each summed over the batch dims its operand broadcast, then reshaped back. Rank-2 products
// are Gemms with trans flags (no Transpose node; oneDNN-eligible).
Grads matmul_grad(GradientBuilder& b) {
    ir::Value* a = b.input(0);
    ir::Value* bb = b.input(1);
    const Shape as = a->type().static_shape(), bs = bb->type().static_shape();
    const Shape as2 = as.size() == 1 ? Shape{1, as[0]} : as;
    const Shape bs2 = bs.size() == 1 ? Shape{bs[0], 1} : bs;
    // Y2's shape: the broadcast batch dims, then [M, N].
    const size_t rank = std::max(as2.size(), bs2.size());
    Shape ys2;
    for (size_t d = 0; d + 2 < rank; ++d) {
        auto dim = [&](const Shape& s) { return d < rank - s.size() ? int64_t{1} : s[d - (rank - s.size())]; };
        ys2.push_back(std::max(dim(as2), dim(bs2)));
    }
    ys2.push_back(as2[as2.size() - 2]);
    ys2.push_back(bs2[bs2.size() - 1]);
    ir::Value* g2 = b.reshape(b.output_grad_or_zeros(0), ys2);
    ir::Value* a2 = b.reshape(a, as2);
    ir::Value* b2 = b.reshape(bb, bs2);
    const bool flat = rank == 2;
    Grads out(2, nullptr);
    if (!flat && bs2.size() == 2) return matmul_grad_shared_b(b, a2, b2, g2, as, bs);
    if (b.needs_grad(0)) {
        ir::Value* da = flat ? b.emit1("Gemm", {g2, b2}, {{"transB", int64_t{1}}}) : b.emit1("MatMul", {g2, swap_last(b, b2)});
        out[0] = b.reshape(b.reduce_to_shape(da, ir::TensorType::of_static(a->type().dtype, as2)), as);
    }
    if (b.needs_grad(1)) {
        ir::Value* db = flat ? b.emit1("Gemm", {a2, g2}, {{"transA", int64_t{1}}}) : b.emit1("MatMul", {swap_last(b, a2), g2});
        out[1] = b.reshape(b.reduce_to_shape(db, ir::TensorType::of_static(bb->type().dtype, bs2)), bs);
    }
    return out;
}

// Y = alpha A' B' + beta C with A' = transA ? A^T : A (B' alike):
//   dA' = alpha G B'^T, so dA = alpha G B'^T (transA=0) or alpha B' G^T (transA=1);
//   dB' = alpha A'^T G, so dB = alpha A'^T G (transB=0) or alpha G^T A' (transB=1);
//   dC = beta G summed to C's shape.
// Each product is one Gemm whose trans flags absorb the transposes.
Grads gemm_grad(GradientBuilder& b) {
    const ir::Node& n = b.node();
    const double alpha = n.attr_float("alpha", 1.0), beta = n.attr_float("beta", 1.0);
    const int64_t ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
    ir::Value* g = b.output_grad_or_zeros(0);
    ir::Value* a = b.input(0);
    ir::Value* bb = b.input(1);
    auto gemm = [&](ir::Value* x, ir::Value* y, int64_t tx, int64_t ty) {
        return b.emit1("Gemm", {x, y}, {{"alpha", alpha}, {"transA", tx}, {"transB", ty}});
    };
    Grads out(b.num_inputs(), nullptr);
    if (b.needs_grad(0)) out[0] = ta ? gemm(bb, g, tb, 1) : gemm(g, bb, 0, 1 - tb);
    if (b.needs_grad(1)) out[1] = tb ? gemm(g, a, 1, ta) : gemm(a, g, 1 - ta, 0);
    if (b.num_inputs() > 2 && b.input(2) && b.needs_grad(2)) {
        ir::Value* gc = beta == 1.0 ? g : b.emit1("Mul", {g, b.scalar(beta, g->type().dtype)});
        out[2] = b.reduce_to_shape(gc, b.input(2)->type());
    }
    return out;
}
}  // namespace

int64_t matmul_packed_block(int64_t m, int64_t n, bool sym_m) {
    constexpr int64_t kVec = 16;  // f32 lanes of one AVX-512 register
    MatmulTile t = matmul_tile(m, n, kVec, 0, sym_m);
    // NOTE: the tile's width even when it does not divide N (the packing pads B' with zero
    // columns): a divisor of N instead (8 for N=1000) left one or two vector accumulators per
    // k step, a chain of dependent FMAs that ran a classifier's GEMV at 0.3-3 GFLOP/s.
    return n <= t.nc ? n : t.nc;
}

int64_t preemptible_packed_block(int64_t nb, int64_t k) {
    constexpr int64_t kVec = 16, kPanelBytes = 384 << 10;
    while (nb > kVec && nb % kVec == 0 && k * nb * 4 > kPanelBytes) nb -= kVec;
    return nb;
}

std::vector<ir::Dim> matmul_output_dims(const ir::Node& n, const ir::TensorType& a, const ir::TensorType& b) {
    KILN_CHECK(a.rank() >= 1 && b.rank() >= 1, kInvalidModel)
        << node_label(n) << ": inputs must have rank >= 1, got A " << dims_str(a.shape) << " and B "
        << dims_str(b.shape);
    const ir::Dim ka = a.shape[a.rank() - 1];
    const ir::Dim kb = b.rank() == 1 ? b.shape[0] : b.shape[b.rank() - 2];
    KILN_CHECK(!(ka.is_static() && kb.is_static()) || ka == kb, kInvalidModel)
        << node_label(n) << ": inner dimensions differ: A " << dims_str(a.shape) << " and B " << dims_str(b.shape);
    std::vector<ir::Dim> ab(a.shape.begin(), a.shape.end() - std::min(a.rank(), 2));
    std::vector<ir::Dim> bb(b.shape.begin(), b.shape.end() - std::min(b.rank(), 2));
    std::vector<ir::Dim> out = broadcast_shapes(n, {ab, bb});
    if (a.rank() >= 2) out.push_back(a.shape[a.rank() - 2]);
    if (b.rank() >= 2) out.push_back(b.shape[b.rank() - 1]);
    return out;
}

te::Tensor matmul_accumulate(const te::Tensor& a, const te::Tensor& b, const Shape& out, DType acc_dtype,
                             const std::string& name, const ElemReader& read_a, const ElemReader& read_b) {
    std::vector<Expr> dims;
    for (int64_t d : out) dims.push_back(te::int_imm(d));
    return matmul_accumulate(a, b, dims, acc_dtype, name, read_a, read_b);
}

/// A reduce axis over dim `d` of `t` (symbolic when the dim is).
static te::IterVar reduce_over(const te::Tensor& t, int d, const std::string& name) {
    if (t->shape[static_cast<size_t>(d)] != te::kDynamicDim) return te::reduce_axis(t->shape[static_cast<size_t>(d)], name);
    return te::reduce_axis(t->shape_exprs()[static_cast<size_t>(d)], name);
}

te::Tensor matmul_accumulate(const te::Tensor& a, const te::Tensor& b, const std::vector<Expr>& out, DType acc_dtype,
                             const std::string& name, const ElemReader& read_a, const ElemReader& read_b) {
    const int ra = a->ndim(), rb = b->ndim();
    const int nbatch = static_cast<int>(out.size()) - (ra >= 2) - (rb >= 2);
    te::IterVar k = reduce_over(a, ra - 1, "k");
    return te::sym_compute(
        out, [&](const std::vector<Var>& i) {
            std::vector<Var> batch(i.begin(), i.begin() + nbatch);
            std::vector<Expr> ai, bi;
            if (ra > 2) ai = broadcast_indices(Shape(a->shape.begin(), a->shape.end() - 2), batch);
            if (rb > 2) bi = broadcast_indices(Shape(b->shape.begin(), b->shape.end() - 2), batch);
            int pos = nbatch;
            if (ra >= 2) ai.push_back(i[pos++]);
            ai.push_back(k->var);
            bi.push_back(k->var);
            if (rb >= 2) bi.push_back(i[pos++]);
            Expr av = read_a ? read_a(ai) : te::read(a, ai);
            Expr bv = read_b ? read_b(bi) : te::read(b, bi);
            return te::sum(te::cast(acc_dtype, av) * te::cast(acc_dtype, bv), {k});
        },
        name, acc_dtype);
}

void schedule_matmul_stages(te::Schedule& s, const std::vector<te::Tensor>& outputs) { matmul_schedule(s, outputs); }

void register_matmul_ops(OpRegistry& r) {
    OpDef matmul = matmul_op();
    matmul.gradient = matmul_grad;
    r.add(std::move(matmul));
    OpDef gemm = gemm_op();
    gemm.gradient = gemm_grad;
    r.add(std::move(gemm));
    r.add(packed_op());
}

}  // namespace kiln::op
