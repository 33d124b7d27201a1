// Lowering a scheduled TE to one tir PrimFunc.
//
// Per non-inlined stage (producer-before-consumer order):
//  1. Index recovery. Every leaf loop variable stands for itself; the split and fuse relations
//     are then applied backwards until every original axis has a value:
//       split:  parent = outer*factor + inner
//       fuse:   outer = floordiv(fused, inner_extent), inner = floormod(fused, inner_extent)
//     (a fixed-point iteration, so the relative order of splits and fuses does not matter).
//  2. Tail guards. A split whose factor does not divide the extent gets `if (parent < extent)`,
//     placed right inside the deepest leaf loop it depends on (so the guard is hoisted as far
//     out as possible). Every split guard is kept, nested splits included, so no element is
//     visited twice (which would double-count a reduction). When the split's outer and inner
//     are both leaves, the outer loop is peeled: iterations 0..E-2 cannot overrun and run
//     without the guard; the last one (outer = E-1) keeps it, and simplify() then turns
//     `for i in 0..f { if (i < r) ... }` into `for i in 0..r`. Iteration order is unchanged, so
//     reductions add in the same order as without the peel. A symbolic extent E always gets the
//     guard; its peel runs floordiv(E, f) unguarded iterations and a tail at outer =
//     floordiv(E, f) (empty when f divides E), whose guard simplify() turns into a loop of
//     floormod(E, f) iterations.
//  3. Body. TensorReads become BufferLoads at row-major flat int64 indices; reads of inlined
//     stages are replaced by that stage's body with its axes substituted (recursively, so
//     chains of inlined stages work).
//  4. Reductions. `out[idx] = identity` is placed just outside the outermost reduce leaf and the
//     innermost statement is `out[idx] = combine(out[idx], source)`. If a data-parallel leaf is
//     nested inside a reduce leaf, no single position initializes each element exactly once
//     before its first update, so a separate init loop nest over the output runs first.
//  5. Local accumulation (Stage::cache_write_local): the reduction's updates go to a small
//     local array indexed by the tile (the data-parallel leaves nested inside the outermost
//     reduce leaf). Just outside that reduce leaf: Allocate(local) { init every tile element;
//     the reduce loops; for each tile element in range (the tile leaves' tail guards):
//     out[idx] = local[tile idx] }. The order of additions per element is unchanged. With a
//     fused epilogue (Stage::fuse_epilogue) the write-back stores epilogue(local[tile idx]) in
//     the epilogue's buffer instead, and the epilogue stage lowers to nothing.
// f16/bf16 reductions accumulate in an f32 buffer (Allocated around the stage) and are narrowed
// into the output once, after the reduction.
// Stages not in `args` are intermediates: their buffers are Allocated around the whole body,
// unless the schedule stores them in another tensor's buffer (Stage::store_in).
#include "tir/lower.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "support/error.h"
#include "te/dims.h"

namespace kiln::tir {

using te::ExprKind;
using te::IterVar;
using te::IterVarNode;

namespace {

// Peeling duplicates the loop body once per peeled split; cap the growth at 4x.
constexpr int kMaxPeeledSplits = 2;
// A register tile's symbolic tail runs as sub-tiles (remainder_tail) up to this factor.
constexpr int64_t kMaxRemainderCases = 8;

// The outer iterations of a peeled split that need no tail guard: ceil(E/f) - 1 for a static
// extent (the last tile, partial or full, is the tail), floordiv(E, f) for a symbolic one (the
// tail is then the partial tile, empty when f divides E). The tail runs with outer = this value.
Expr full_tiles(const te::SplitRelation& s) {
    if (s.parent->is_static()) return te::int_imm((s.parent->extent + s.factor - 1) / s.factor - 1);
    return te::floordiv(s.parent->sym_extent, te::int_imm(s.factor));
}

// Whether the tail of split `s` runs as sub-tiles of constant extent (remainder_tail): a
// register tile (`use_local`) split along a symbolic extent by a small factor.
bool has_remainder_cases(const te::SplitRelation& s, bool use_local) {
    return use_local && !s.parent->is_static() && s.factor > 1 && s.factor <= kMaxRemainderCases;
}

void collect_vars(const Expr& e, std::unordered_set<const te::VarNode*>& out) {
    if (!e) return;
    switch (e->kind) {
        case ExprKind::kVar: out.insert(static_cast<const te::VarNode*>(e.get())); break;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            collect_vars(n.a, out);
            collect_vars(n.b, out);
            break;
        }
        case ExprKind::kUnary: collect_vars(static_cast<const te::UnaryNode&>(*e).a, out); break;
        case ExprKind::kCast: collect_vars(static_cast<const te::CastNode&>(*e).a, out); break;
        default: break;  // index expressions contain only vars, immediates and arithmetic
    }
}

// Row-major flat index; strides are products of the (possibly symbolic) dims after each one.
Expr flat_index(const std::vector<Expr>& shape, const std::vector<Expr>& idx) {
    KILN_ICHECK(shape.size() == idx.size())
        << "index rank " << idx.size() << " vs buffer rank " << shape.size();
    if (idx.empty()) return te::int_imm(0);
    std::vector<Expr> terms(idx.size());
    Expr stride;  // null: 1
    for (size_t k = idx.size(); k-- > 0;) {
        terms[k] = stride ? te::binary(te::BinaryOp::kMul, idx[k], stride) : idx[k];
        stride = stride ? te::binary(te::BinaryOp::kMul, stride, shape[k]) : shape[k];
        int64_t one;
        if (te::const_int(stride, &one) && one == 1) stride = nullptr;
    }
    Expr out = terms[0];
    for (size_t k = 1; k < terms.size(); ++k) out = te::binary(te::BinaryOp::kAdd, out, terms[k]);
    return out;
}

Expr combine(te::ReduceOp op, Expr acc, Expr src) {
    switch (op) {
        case te::ReduceOp::kSum:
            return te::binary(te::BinaryOp::kAdd, std::move(acc), std::move(src));
        case te::ReduceOp::kProd:
            return te::binary(te::BinaryOp::kMul, std::move(acc), std::move(src));
        case te::ReduceOp::kMax:
            return te::binary(te::BinaryOp::kMax, std::move(acc), std::move(src));
        case te::ReduceOp::kMin:
            return te::binary(te::BinaryOp::kMin, std::move(acc), std::move(src));
    }
    return nullptr;
}

class Lowerer {
public:
    explicit Lowerer(const te::Schedule& sch) : sch_(sch) {
        for (const auto& st : sch.stages()) stages_[st.tensor().get()] = &st;
    }

    Buffer add_buffer(const te::Tensor& t) {
        std::string name = t->name.empty() ? "buf" : t->name;
        for (int k = 1; used_names_.count(name); ++k) name = t->name + "_" + std::to_string(k);
        used_names_.insert(name);
        Buffer b = te::make_sym_buffer(name, t->dtype, t->shape_exprs());
        buffers_[t.get()] = b;
        return b;
    }
    bool has_buffer(const te::Tensor& t) const { return buffers_.count(t.get()) > 0; }
    /// t's values live in target's buffer (Stage::store_in).
    void alias_buffer(const te::Tensor& t, const te::Tensor& target) {
        auto it = buffers_.find(target.get());
        KILN_CHECK(it != buffers_.end(), kInvalidArgument)
            << "stage '" << t->name << "' is stored in '" << target->name << "', which has no buffer yet";
        buffers_[t.get()] = it->second;
    }

    /// TensorReads -> BufferLoads / inlined bodies.
    Expr convert(const Expr& e) {
        switch (e->kind) {
            case ExprKind::kIntImm:
            case ExprKind::kFloatImm:
            case ExprKind::kVar:
            case ExprKind::kBufferLoad: return e;
            case ExprKind::kBinary: {
                const auto& n = static_cast<const te::BinaryNode&>(*e);
                return std::make_shared<te::BinaryNode>(n.dtype, n.op, convert(n.a), convert(n.b));
            }
            case ExprKind::kUnary: {
                const auto& n = static_cast<const te::UnaryNode&>(*e);
                return std::make_shared<te::UnaryNode>(n.dtype, n.op, convert(n.a));
            }
            case ExprKind::kCast: {
                const auto& n = static_cast<const te::CastNode&>(*e);
                return std::make_shared<te::CastNode>(n.dtype, convert(n.a));
            }
            case ExprKind::kSelect: {
                const auto& n = static_cast<const te::SelectNode&>(*e);
                return std::make_shared<te::SelectNode>(n.dtype, convert(n.cond), convert(n.t),
                                                        convert(n.f));
            }
            case ExprKind::kTensorRead:
                return convert_read(static_cast<const te::TensorReadNode&>(*e));
            case ExprKind::kReduce: break;
        }
        KILN_THROW(kInvalidArgument) << "a reduction may only be the whole body of a compute";
    }

    Stmt lower_stage(const te::Stage& st);
    /// The value `epilogue` (te::Stage::fuse_epilogue) stores at index `idx` of its output,
    /// its reads of `producer` taken as `acc` (the reduction's value there).
    Expr epilogue_value(const te::Tensor& producer, const te::Tensor& epilogue, const std::vector<Expr>& idx,
                        const Expr& acc) {
        std::unordered_map<const te::VarNode*, Expr> vmap;
        for (size_t k = 0; k < epilogue->axis.size(); ++k) vmap[epilogue->axis[k]->var.get()] = idx[k];
        read_as_[producer.get()] = acc;
        Expr v = convert(te::substitute(epilogue->body, vmap));
        read_as_.erase(producer.get());
        return v;
    }
    /// Serial loop nest over t's axes running store(flat index).
    Stmt over_output(const te::Tensor& t, const std::string& suffix,
                     const std::function<Stmt(const Expr&)>& store);

private:
    Expr convert_read(const te::TensorReadNode& r) {
        std::vector<Expr> idx;
        for (const auto& i : r.indices) idx.push_back(convert(i));
        const te::Tensor& t = r.tensor;
        if (auto a = read_as_.find(t.get()); a != read_as_.end()) return a->second;
        auto sit = stages_.find(t.get());
        if (sit != stages_.end() && sit->second->is_inlined()) {
            std::unordered_map<const te::VarNode*, Expr> vmap;
            for (size_t k = 0; k < t->axis.size(); ++k) vmap[t->axis[k]->var.get()] = idx[k];
            return convert(te::substitute(t->body, vmap));
        }
        auto bit = buffers_.find(t.get());
        KILN_CHECK(bit != buffers_.end(), kInvalidArgument)
            << "lower: tensor '" << t->name
            << "' is read but is neither a kernel argument nor a scheduled stage";
        return std::make_shared<te::BufferLoadNode>(r.dtype, bit->second,
                                                    flat_index(t->shape_exprs(), idx));
    }

    const te::Schedule& sch_;
    std::unordered_map<const te::TensorNode*, const te::Stage*> stages_;
    std::unordered_map<const te::TensorNode*, Buffer> buffers_;
    std::unordered_map<const te::TensorNode*, Expr> read_as_;  // epilogue_value's reads of its producer
    std::unordered_set<std::string> used_names_;
};

Stmt Lowerer::lower_stage(const te::Stage& st) {
    const te::Tensor& t = st.tensor();
    const Buffer& out_buf = buffers_.at(t.get());
    //  5. Local accumulation (Stage::cache_write_local): the reduction's updates go to a small
//     local array indexed by the tile (the data-parallel leaves nested inside the outermost
//     reduce leaf). Just outside that reduce leaf: Allocate(local) { init every tile element;
//     the reduce loops; for each tile element in range (the tile leaves' tail guards):
//     out[idx] = local[tile idx] }. The order of additions per element is unchanged. With a
//     fused epilogue (Stage::fuse_epilogue) the write-back stores epilogue(local[tile idx]) in
//     the epilogue's buffer instead, and the epilogue stage lowers to nothing.
// f16/bf16 reductions accumulate in an f32 buffer, narrowed once at the end.
    Buffer buf = out_buf;
    const bool is_reduce = t->body->kind == ExprKind::kReduce;
    if (is_reduce && te::compute_dtype(out_buf->dtype) != out_buf->dtype) {
        std::string name = out_buf->name + "_acc";
        for (int k = 1; used_names_.count(name); ++k)
            name = out_buf->name + "_acc" + std::to_string(k);
        used_names_.insert(name);
        buf = te::make_sym_buffer(name, te::compute_dtype(out_buf->dtype), t->shape_exprs());
    }
    const std::vector<IterVar>& leaves = st.leaf_iter_vars();
    const size_t n = leaves.size();

    // 5. (below) needs to know whether the reduction accumulates in a local tile now.
    const bool use_local = is_reduce && st.writes_local();
    // A split that may run its partial tile as sub-tiles (remainder_tail) adds a row offset Var
    // to its recovered index: the sub-tile's start within the partial tile, 0 everywhere else.
    std::vector<Var> tail_offset(st.splits().size());
    size_t symbolic_splits = 0;
    for (size_t si = 0; si < st.splits().size(); ++si) {
        if (!st.splits()[si].parent->is_static() && st.splits()[si].factor > 1) ++symbolic_splits;
        if (has_remainder_cases(st.splits()[si], use_local))
            tail_offset[si] = te::make_var(st.splits()[si].parent->var->name + "_tail_offset");
    }

    // 1. Index recovery.
    std::unordered_map<const IterVarNode*, Expr> val;
    for (const auto& l : leaves) val[l.get()] = l->var;
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t si = 0; si < st.splits().size(); ++si) {
            const te::SplitRelation& s = st.splits()[si];
            if (val.count(s.parent.get()) || !val.count(s.outer.get()) || !val.count(s.inner.get()))
                continue;
            Expr index = te::binary(
                te::BinaryOp::kAdd,
                te::binary(te::BinaryOp::kMul, val[s.outer.get()], te::int_imm(s.factor)),
                val[s.inner.get()]);
            if (tail_offset[si]) index = te::binary(te::BinaryOp::kAdd, index, tail_offset[si]);
            val[s.parent.get()] = index;
            changed = true;
        }
        for (const auto& f : st.fuses()) {
            if (!val.count(f.fused.get()) || val.count(f.outer.get())) continue;
            Expr ext = f.inner->extent_expr();
            val[f.outer.get()] = te::floordiv(val[f.fused.get()], ext);
            val[f.inner.get()] = te::floormod(val[f.fused.get()], ext);
            changed = true;
        }
    }
    std::unordered_map<const te::VarNode*, Expr> vmap;
    std::vector<Expr> out_idx;
    for (const auto& ax : t->axis) {
        KILN_ICHECK(val.count(ax.get()))
            << "axis " << ax->var->name << " of " << t->name << " not recovered";
        vmap[ax->var.get()] = val[ax.get()];
        out_idx.push_back(val[ax.get()]);
    }
    for (const auto& ax : st.all_reduce_axes()) {
        KILN_ICHECK(val.count(ax.get()))
            << "reduce axis " << ax->var->name << " of " << t->name << " not recovered";
        vmap[ax->var.get()] = val[ax.get()];
    }

    // 2. Tail guards, attached at depth (1 + deepest leaf they depend on).
    std::unordered_map<const te::VarNode*, size_t> leaf_of_var;
    for (size_t k = 0; k < n; ++k) leaf_of_var[leaves[k]->var.get()] = k;
    // guards_at[depth] = (split index, condition); peel_at[leaf] = split whose loop is peeled.
    std::vector<std::vector<std::pair<size_t, Expr>>> guards_at(n + 1);
    std::vector<int> peel_at(n, -1);
    int peeled = 0;
    // Dim Vars (te/dims.h) in a recovered index (a fuse of symbolic extents divides by them) are
    // the kernel's parameters, bound before every loop: they add no depth.
    std::vector<Var> stage_dims;
    for (const auto& d : t->sym_shape) te::collect_dim_vars(d, stage_dims);
    for (const auto& iv : st.leaf_iter_vars()) te::collect_dim_vars(iv->sym_extent, stage_dims);
    for (const auto& iv : st.all_reduce_axes()) te::collect_dim_vars(iv->sym_extent, stage_dims);
    for (const auto& sp : st.splits()) te::collect_dim_vars(sp.parent->sym_extent, stage_dims);
    for (const auto& f : st.fuses()) te::collect_dim_vars(f.fused->sym_extent, stage_dims);
    auto is_dim = [&](const te::VarNode* v) {
        for (const auto& d : stage_dims)
            if (d.get() == v) return true;
        return false;
    };
    auto is_tail_offset = [&](const te::VarNode* v) {
        for (const auto& o : tail_offset)
            if (o.get() == v) return true;
        return false;
    };
    for (size_t si = 0; si < st.splits().size(); ++si) {
        const auto& s = st.splits()[si];
        if (s.parent->is_static() && s.parent->extent % s.factor == 0) continue;
        Expr v = val.at(s.parent.get());
        std::unordered_set<const te::VarNode*> deps;
        collect_vars(v, deps);
        size_t depth = 0;
        for (const auto* d : deps) {
            if (is_dim(d) || is_tail_offset(d)) continue;
            auto it = leaf_of_var.find(d);
            KILN_ICHECK(it != leaf_of_var.end()) << "guard depends on a non-leaf var " << d->name;
            depth = std::max(depth, it->second + 1);
        }
        guards_at[depth].emplace_back(si, te::binary(te::BinaryOp::kLT, v, s.parent->extent_expr()));
        auto po = leaf_of_var.find(s.outer->var.get());
        if (peeled < kMaxPeeledSplits && po != leaf_of_var.end() && peel_at[po->second] < 0 &&
            leaf_of_var.count(s.inner->var.get())) {
            peel_at[po->second] = static_cast<int>(si);
            ++peeled;
        }
    }

    // Prefetches (Stage::prefetch) at the top of their leaf's loop body: their indices over the
    // stage's IterVars, recovered as the body's are.
    std::vector<std::vector<Stmt>> prefetch_at(n);
    if (!st.prefetches().empty()) {
        std::unordered_map<const te::VarNode*, Expr> ivmap;
        for (const auto& [iv, e] : val) ivmap[iv->var.get()] = e;
        for (const te::Stage::Prefetch& pf : st.prefetches()) {
            std::vector<Expr> idx;
            for (const Expr& i : pf.index) idx.push_back(te::substitute(i, ivmap));
            auto b = buffers_.find(pf.tensor.get());
            KILN_ICHECK(b != buffers_.end()) << "prefetch of " << pf.tensor->name << ", which has no buffer";
            auto at = leaf_of_var.find(pf.at->var.get());
            KILN_CHECK(at != leaf_of_var.end(), kInvalidArgument)
                << "stage '" << t->name << "': prefetch of " << pf.tensor->name << " at " << pf.at->var->name
                << ", which a later split or fuse made no loop";
            prefetch_at[at->second].push_back(make_prefetch(b->second, flat_index(pf.tensor->shape_exprs(), idx)));
        }
    }
    // The body of leaf d's loop, after its prefetches.
    auto loop_body = [&](size_t d, Stmt body) {
        if (prefetch_at[d].empty()) return body;
        std::vector<Stmt> seq = prefetch_at[d];
        seq.push_back(std::move(body));
        return make_seq(std::move(seq));
    };

    // 3./4. Body and reduction structure.
    Expr out_index = flat_index(t->shape_exprs(), out_idx);
    Stmt main_store, init_store;
    size_t first_reduce = n;
    bool separate_init = false;
    // 5. Local accumulation (Stage::cache_write_local): `tile` holds the positions of the
    // data-parallel leaves inside the outermost reduce leaf; they index `local`.
    std::vector<size_t> tile;
    Buffer local;
    Expr local_index;
    Stmt local_init, local_write;
    if (is_reduce) {
        const auto& r = static_cast<const te::ReduceNode&>(*t->body);
        Expr src = convert(te::substitute(r.source, vmap));
        for (size_t k = 0; k < n; ++k) {
            if (leaves[k]->is_reduce) {
                first_reduce = std::min(first_reduce, k);
            } else if (first_reduce < k) {
                separate_init = true;
                tile.push_back(k);
            }
        }
        if (use_local) {
            separate_init = false;
            std::vector<int64_t> shape;
            std::vector<Expr> idx;
            int64_t elems = 1;
            for (size_t k : tile) {
                KILN_CHECK(st.loop_kind(leaves[k]) != te::LoopKind::kParallel, kInvalidArgument)
                    << "stage '" << t->name << "': a local accumulator tile cannot hold parallel leaf "
                    << leaves[k]->var->name;
                KILN_CHECK(leaves[k]->is_static(), kInvalidArgument)
                    << "stage '" << t->name << "': a local accumulator tile needs static extents, leaf "
                    << leaves[k]->var->name << " has extent " << te::expr_str(leaves[k]->sym_extent);
                shape.push_back(leaves[k]->extent);
                idx.push_back(leaves[k]->var);
                elems *= leaves[k]->extent;
            }
            KILN_CHECK(elems <= te::Stage::kMaxLocalElems, kInvalidArgument)
                << "stage '" << t->name << "': local accumulator tile of " << elems << " elements exceeds "
                << te::Stage::kMaxLocalElems;
            std::string name = t->name + "_local";
            for (int k = 1; used_names_.count(name); ++k) name = t->name + "_local" + std::to_string(k);
            used_names_.insert(name);
            local = te::make_buffer(name, r.dtype, shape);
            local->local = true;
            local_index = flat_index(local->shape_exprs(), idx);
            Expr acc = std::make_shared<te::BufferLoadNode>(r.dtype, local, local_index);
            main_store = make_store(local, local_index, combine(r.op, acc, src));
            local_init = make_store(local, local_index, te::reduce_identity(r.op, r.dtype));
            local_write = make_store(buf, out_index, st.epilogue() ? epilogue_value(t, st.epilogue(), out_idx, acc) : acc);
        } else {
            Expr acc = std::make_shared<te::BufferLoadNode>(r.dtype, buf, out_index);
            main_store = make_store(buf, out_index, combine(r.op, acc, src));
        }
        init_store = make_store(buf, out_index, te::reduce_identity(r.op, r.dtype));
    } else {
        main_store = make_store(buf, out_index, convert(te::substitute(t->body, vmap)));
    }

    // `override_guard[si]`, when set: split si's guard in the tail being built (remainder_tail).
    std::vector<Expr> override_guard(st.splits().size());
    auto guard = [&](size_t si, const Expr& g) { return override_guard[si] ? override_guard[si] : g; };
    std::function<Stmt(size_t, const std::vector<bool>&)> build;
    // The tail of a register tile split along a symbolic extent E by f (a matmul's rows): with
    // a run-time row count the tile could not stay in registers (its index ran to floormod(E,
    // f); MiniLM's products at seq 8 ran 1.2x the static kernel's). The rem = floormod(E, f)
    // rows run instead with constant extents, in one of two forms:
    //  - one copy of the body per remainder r = 1..f-1, the r rows in one pass over the
    //    reduction (a product with a weight matrix streams it once for the partial tile);
    //  - when another split of the stage is symbolic too (attention's q.k^T: rows and columns),
    //    whose main part and tail would each hold those f-1 copies (a kernel that took a second
    //    to compile): sub-tiles of 4, 2 and 1 rows (for f = 8), one per bit of rem, each at its
    //    run-time offset in the partial tile. Three copies; the operand they re-read is small.
    const bool other_symbolic_split = symbolic_splits > 1;
    auto remainder_tail = [&](size_t d, int peel, const Expr& full, const std::vector<bool>& dropped) -> Stmt {
        const size_t si = static_cast<size_t>(peel);
        const te::SplitRelation& sp = st.splits()[si];
        const Expr rem = te::floormod(sp.parent->extent_expr(), te::int_imm(sp.factor));
        std::vector<Stmt> parts;
        auto part = [&](int64_t rows, const Expr& offset, const Expr& when) {
            override_guard[si] = te::binary(te::BinaryOp::kLT, sp.inner->var, te::int_imm(rows));
            Stmt body = substitute(loop_body(d, build(d + 1, dropped)), {{leaves[d]->var.get(), full}, {tail_offset[si].get(), offset}});
            parts.push_back(make_if(when, body));
        };
        if (!other_symbolic_split) {
            for (int64_t r = 1; r < sp.factor; ++r) part(r, te::int_imm(0), te::eq(rem, te::int_imm(r)));
        } else {
            int64_t rows = 1;
            while (rows * 2 < sp.factor) rows *= 2;
            for (; rows >= 1; rows /= 2) {
                // The rows of rem's higher bits come first: offset = floordiv(rem, 2*rows) * 2*rows.
                const Expr two = te::int_imm(2 * rows);
                part(rows, te::binary(te::BinaryOp::kMul, te::floordiv(rem, two), two),
                     te::eq(te::floormod(te::floordiv(rem, te::int_imm(rows)), te::int_imm(2)), te::int_imm(1)));
            }
        }
        override_guard[si] = Expr();
        return make_seq(std::move(parts));
    };
    auto remainder_cases = [&](int peel) {
        return has_remainder_cases(st.splits()[static_cast<size_t>(peel)], use_local);
    };
    // `dropped[si]`: split si's guard is known true here (inside the main part of its peel).
    build =
        [&](size_t d, const std::vector<bool>& dropped) -> Stmt {
        Stmt inner;
        if (d == n) {
            inner = main_store;
        } else {
            const Var& v = leaves[d]->var;
            const te::LoopKind kind = st.loop_kind(leaves[d]);
            const int peel = peel_at[d];
            if (peel >= 0 && !dropped[static_cast<size_t>(peel)]) {
                std::vector<bool> main_dropped = dropped;
                main_dropped[static_cast<size_t>(peel)] = true;
                const Expr full = full_tiles(st.splits()[static_cast<size_t>(peel)]);
                Stmt main = make_for(v, full, kind, loop_body(d, build(d + 1, main_dropped)));
                Stmt tail = remainder_cases(peel) ? remainder_tail(d, peel, full, dropped)
                                                  : substitute(loop_body(d, build(d + 1, dropped)), {{v.get(), full}});
                inner = make_seq({main, tail});
            } else {
                inner = make_for(v, leaves[d]->extent_expr(), kind, loop_body(d, build(d + 1, dropped)));
            }
        }
        if (use_local && d == first_reduce) {
            // init the tile, reduce into it, then write each in-range element once.
            Stmt init = local_init, write = local_write;
            for (size_t q = tile.size(); q-- > 0;) {
                const size_t k = tile[q];
                Expr c;
                for (const auto& [si, g] : guards_at[k + 1]) {
                    if (dropped[si]) continue;
                    c = c ? te::logical_and(c, guard(si, g)) : guard(si, g);
                }
                if (c) write = make_if(c, write);
                const te::LoopKind kind = st.loop_kind(leaves[k]);
                init = make_for(leaves[k]->var, leaves[k]->extent_expr(), kind, init);
                write = make_for(leaves[k]->var, leaves[k]->extent_expr(), kind, write);
            }
            inner = make_allocate(local, make_seq({init, inner, write}));
        } else if (is_reduce && !separate_init && d == first_reduce) {
            inner = make_seq({init_store, inner});
        }
        Expr cond;
        for (const auto& [si, c] : guards_at[d]) {
            if (dropped[si]) continue;
            cond = cond ? te::logical_and(cond, guard(si, c)) : guard(si, c);
        }
        if (cond) inner = make_if(cond, inner);
        return inner;
    };
    Stmt nest = build(0, std::vector<bool>(st.splits().size(), false));
    std::unordered_map<const te::VarNode*, Expr> no_offset;
    for (const auto& o : tail_offset)
        if (o) no_offset[o.get()] = te::int_imm(0);
    nest = substitute(nest, no_offset);
    if (separate_init) {
        const auto& r = static_cast<const te::ReduceNode&>(*t->body);
        Expr identity = te::reduce_identity(r.op, r.dtype);
        nest = make_seq(
            {over_output(t, "_init", [&](const Expr& i) { return make_store(buf, i, identity); }),
             nest});
    }
    if (buf == out_buf) return nest;
    Stmt narrow = over_output(t, "_out", [&](const Expr& i) {
        return make_store(out_buf, i, std::make_shared<te::BufferLoadNode>(buf->dtype, buf, i));
    });
    return make_allocate(buf, make_seq({nest, narrow}));
}

Stmt Lowerer::over_output(const te::Tensor& t, const std::string& suffix,
                          const std::function<Stmt(const Expr&)>& store) {
    std::vector<Var> vars;
    std::vector<Expr> idx;
    for (const auto& ax : t->axis) {
        vars.push_back(te::make_var(ax->var->name + suffix));
        idx.push_back(vars.back());
    }
    Stmt body = store(flat_index(t->shape_exprs(), idx));
    for (size_t k = t->axis.size(); k-- > 0;) {
        body = make_for(vars[k], t->axis[k]->extent_expr(), te::LoopKind::kSerial, body);
    }
    return body;
}

}  // namespace

namespace {
// Every symbolic dim used by a tensor's shape or a stage's loops must be a kernel parameter.
void check_dims_bound(const te::Schedule& sch, const std::vector<Var>& dims, const std::string& name) {
    std::vector<Var> used;
    for (const auto& t : te::post_order(sch.outputs()))
        for (const auto& d : t->sym_shape) te::collect_dim_vars(d, used);
    for (const auto& st : sch.stages()) {
        for (const auto& iv : st.leaf_iter_vars()) te::collect_dim_vars(iv->sym_extent, used);
        for (const auto& iv : st.all_reduce_axes()) te::collect_dim_vars(iv->sym_extent, used);
    }
    for (const auto& v : used) {
        bool found = false;
        for (const auto& d : dims) found = found || d == v;
        KILN_CHECK(found, kInvalidArgument)
            << "lower '" << name << "': symbolic dim '" << v->name
            << "' is used by the computation but is not one of the kernel's dims";
    }
}
}  // namespace

PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args,
               const std::string& name) {
    std::vector<Var> dims;
    for (const auto& a : args)
        if (a)
            for (const auto& d : a->sym_shape) te::collect_dim_vars(d, dims);
    // And the dims of tensors inlined inside the kernel (a Pad of a Pad: the inner one's
    // `h+1` is no argument's dim), in first-use order after the arguments'.
    for (const auto& t : te::post_order(sch.outputs()))
        for (const auto& d : t->sym_shape) te::collect_dim_vars(d, dims);
    for (const auto& st : sch.stages()) {
        for (const auto& iv : st.leaf_iter_vars()) te::collect_dim_vars(iv->sym_extent, dims);
        for (const auto& iv : st.all_reduce_axes()) te::collect_dim_vars(iv->sym_extent, dims);
    }
    return lower(sch, args, name, dims);
}

PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args, const std::string& name,
               const std::vector<Var>& dims) {
    for (size_t i = 0; i < dims.size(); ++i) {
        KILN_CHECK(dims[i] && dims[i]->dtype == DType::kInt64, kInvalidArgument)
            << "lower '" << name << "': dim " << i << " must be an int64 Var";
        for (size_t j = 0; j < i; ++j)
            KILN_CHECK(dims[j] != dims[i], kInvalidArgument)
                << "lower '" << name << "': dim '" << dims[i]->name << "' is listed twice";
    }
    check_dims_bound(sch, dims, name);
    Lowerer lw(sch);
    PrimFunc f;
    f.name = name;
    f.dims = dims;
    for (const auto& a : args) {
        KILN_CHECK(a != nullptr, kInvalidArgument) << "lower '" << name << "': null tensor in args";
        KILN_CHECK(!lw.has_buffer(a), kInvalidArgument)
            << "lower '" << name << "': tensor '" << a->name << "' appears twice in args";
        f.params.push_back(lw.add_buffer(a));
    }
    for (const auto& t : te::post_order(sch.outputs())) {
        KILN_CHECK(!t->is_placeholder || lw.has_buffer(t), kInvalidArgument)
            << "lower '" << name << "': placeholder '" << t->name
            << "' is read but not listed in args";
    }
    std::vector<Buffer> allocs;
    std::vector<Stmt> body;
    for (const auto& st : sch.stages()) {
        const te::Tensor& t = st.tensor();
        if (st.is_inlined()) {
            KILN_CHECK(!lw.has_buffer(t), kInvalidArgument)
                << "lower '" << name << "': stage '" << t->name
                << "' is inlined but also a kernel argument";
            continue;
        }
        if (st.is_fused_epilogue()) continue;  // its producer's tile write-back computes it
        if (!lw.has_buffer(t)) {
            if (st.storage())
                lw.alias_buffer(t, st.storage());
            else
                allocs.push_back(lw.add_buffer(t));
        }
        body.push_back(lw.lower_stage(st));
    }
    f.body = make_seq(std::move(body));
    if (!f.body) f.body = std::make_shared<SeqNode>(std::vector<Stmt>{});
    for (size_t k = allocs.size(); k-- > 0;) f.body = make_allocate(allocs[k], f.body);
    return f;
}

}  // namespace kiln::tir
