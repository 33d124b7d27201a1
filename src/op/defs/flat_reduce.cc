// Reductions at memory bandwidth (flat_reduce.h has the two forms and why).
#include "op/defs/flat_reduce.h"

#include <algorithm>

#include "op/defs/row_reduce.h"
#include "op/op_def.h"
#include "op/schedule_util.h"

namespace kiln::op {

namespace {

// A chunk streams at least this many elements (64 KB of f32): below it the parallel hand-off
// and the final combine cost more than the split saves.
constexpr int64_t kMinChunk = 16384;
// Parallel (row, chunk) units wanted: enough for 16 to 32 threads.
constexpr int64_t kParts = 32;

// The final combine of at most this many partials per row is a balanced tree of binary ops:
// a reduce loop would chain them (each step waits for the last), which costs more than the
// partial stage itself for rows of a few vectors.
constexpr int64_t kMaxTree = 64;

te::Expr combine2(te::ReduceOp op, te::Expr a, te::Expr b) {
    switch (op) {
        case te::ReduceOp::kSum: return a + b;
        case te::ReduceOp::kMax: return te::max(a, b);
        case te::ReduceOp::kMin: return te::min(a, b);
        case te::ReduceOp::kProd: return a * b;
    }
    return {};
}

// Pairwise combination of leaves (depth log2(n)); the values are cast to dt as a reduction's
// accumulator would hold them.
te::Expr combine_tree(te::ReduceOp op, std::vector<te::Expr> leaves, DType dt) {
    for (te::Expr& e : leaves) e = te::cast(dt, e);
    while (leaves.size() > 1) {
        std::vector<te::Expr> next;
        for (size_t i = 0; i + 1 < leaves.size(); i += 2) next.push_back(combine2(op, leaves[i], leaves[i + 1]));
        if (leaves.size() % 2) next.push_back(leaves.back());
        leaves = std::move(next);
    }
    return leaves[0];
}

void collect_reads(const te::Expr& e, std::vector<const te::TensorReadNode*>& out) {
    if (!e) return;
    switch (e->kind) {
        case te::ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            collect_reads(b.a, out);
            collect_reads(b.b, out);
            break;
        }
        case te::ExprKind::kUnary: collect_reads(static_cast<const te::UnaryNode&>(*e).a, out); break;
        case te::ExprKind::kCast: collect_reads(static_cast<const te::CastNode&>(*e).a, out); break;
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            collect_reads(s.cond, out);
            collect_reads(s.t, out);
            collect_reads(s.f, out);
            break;
        }
        case te::ExprKind::kReduce: collect_reads(static_cast<const te::ReduceNode&>(*e).source, out); break;
        case te::ExprKind::kTensorRead: out.push_back(static_cast<const te::TensorReadNode*>(e.get())); break;
        default: break;
    }
}

}  // namespace

FlatReducePlan plan_flat_reduce(DType t, int64_t rows, int64_t extent) {
    const int64_t w = vector_width(t);
    FlatReducePlan p;
    if (extent < 2 * w) return p;
    // Four vectors of lanes (four independent accumulator chains) once a row is long enough
    // that the final combine of the lanes is small beside it.
    p.lanes = extent >= 64 * w ? 4 * w : w;
    const int64_t want = rows >= kParts ? 1 : (kParts + rows - 1) / rows;
    p.chunks = std::max<int64_t>(1, std::min(want, extent / kMinChunk));
    p.per = extent / (p.chunks * p.lanes);
    return p;
}

te::Expr reduce_with(te::ReduceOp op, te::Expr v, const std::vector<te::IterVar>& axes) {
    switch (op) {
        case te::ReduceOp::kSum: return te::sum(std::move(v), axes);
        case te::ReduceOp::kMax: return te::max_reduce(std::move(v), axes);
        case te::ReduceOp::kMin: return te::min_reduce(std::move(v), axes);
        case te::ReduceOp::kProd: return te::prod_reduce(std::move(v), axes);
    }
    return {};
}

std::vector<te::Expr> unflatten_index(const std::vector<te::Expr>& rows, const te::Expr& k, const Shape& dims) {
    std::vector<te::Expr> idx(rows.begin(), rows.end());
    const size_t base = idx.size();
    idx.resize(base + dims.size());
    te::Expr q = k;
    for (size_t d = dims.size(); d-- > 1;) {
        idx[base + d] = te::floormod(q, te::int_imm(dims[d]));
        q = te::floordiv(q, te::int_imm(dims[d]));
    }
    if (!dims.empty()) idx[base] = q;  // k < the product of dims: no modulo needed
    return idx;
}

te::Tensor flat_reduce(const Shape& rows_shape, int64_t extent, const FlatReducePlan& plan, te::ReduceOp op, DType dt,
                       const FlatBody& body, const Shape& out_shape, const RowsOf& rows_of, const std::string& name) {
    const size_t nr = rows_shape.size();
    const int64_t lanes = plan.lanes, chunks = plan.chunks, per = plan.per;
    Shape part_shape = rows_shape;
    part_shape.push_back(chunks);
    part_shape.push_back(lanes);
    te::IterVar o = te::reduce_axis(per, "ro");
    te::Tensor part = te::compute(
        part_shape,
        [&](const std::vector<te::Var>& i) {
            std::vector<te::Expr> rows(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(nr));
            te::Expr k = (te::Expr(i[nr]) * per + te::Expr(o->var)) * lanes + te::Expr(i[nr + 1]);
            return reduce_with(op, body(rows, k), {o});
        },
        name + "_part", te::compute_dtype(dt));  // f16 partials would round each chunk
    const int64_t covered = chunks * per * lanes, nparts = chunks * lanes;
    const int64_t tail = extent - covered;
    if (nparts + tail <= kMaxTree) {  // few partials per row: a balanced tree, no serial chain
        return te::compute(
            out_shape,
            [&](const std::vector<te::Var>& out) {
                std::vector<te::Expr> rows = rows_of(out), leaves;
                for (int64_t c = 0; c < chunks; ++c)
                    for (int64_t l = 0; l < lanes; ++l) {
                        std::vector<te::Expr> pi = rows;
                        pi.push_back(te::int_imm(c));
                        pi.push_back(te::int_imm(l));
                        leaves.push_back(te::read(part, pi));
                    }
                for (int64_t t = 0; t < tail; ++t) leaves.push_back(body(rows, te::int_imm(covered + t)));
                return combine_tree(op, leaves, te::compute_dtype(dt));
            },
            name, dt);
    }
    te::IterVar q = te::reduce_axis(nparts + tail, "rq");
    return te::compute(
        out_shape,
        [&](const std::vector<te::Var>& out) {
            std::vector<te::Expr> rows = rows_of(out);
            te::Expr qe = q->var;
            te::Expr qp = tail == 0 ? qe : te::min(qe, te::int_imm(nparts - 1));
            std::vector<te::Expr> pi = rows;
            pi.push_back(te::floordiv(qp, te::int_imm(lanes)));
            pi.push_back(te::floormod(qp, te::int_imm(lanes)));
            te::Expr v = te::read(part, pi);
            if (tail > 0) {  // the leftovers after the chunks, one element per step
                te::Expr k = te::int_imm(covered) + te::max(qe - nparts, te::int_imm(0));
                v = te::select(qe < te::int_imm(nparts), v, body(rows, k));
            }
            return reduce_with(op, v, {q});
        },
        name, dt);
}

bool reduces_columns(const te::Stage& st) {
    const te::Tensor& t = st.tensor();
    if (st.all_reduce_axes().empty() || t->ndim() == 0 || t->shape.back() < 2 || !t->body) return false;
    const te::VarNode* last = t->axis.back()->var.get();
    std::vector<const te::TensorReadNode*> reads;
    collect_reads(t->body, reads);
    bool any = false;
    for (const te::TensorReadNode* r : reads) {
        if (r->tensor->is_static() && r->tensor->numel() <= 1) continue;  // a scalar operand
        if (r->indices.empty() || r->indices.back().get() != last) return false;
        any = true;
    }
    return any;
}

void schedule_column_reduce(te::Stage& st, te::ScheduleConfig& cfg) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    const int64_t n = t->shape[nd - 1], w = vector_width(t->dtype);
    const int64_t vecs = (n + w - 1) / w;
    int64_t nr = std::min<int64_t>(4, vecs);
    if (n > w) {  // beyond 4 vectors the tile spills to L1 but reads longer runs per row
        std::vector<int64_t> nrs;
        for (int64_t c : {1, 2, 3, 4, 8, 16})
            if (c <= vecs) nrs.push_back(c);
        nr = cfg.knob("colred.nr", nrs, nr);
    }
    auto [jo, ji] = st.split(st.axis(nd - 1), std::min(n, nr * w));
    std::vector<te::IterVar> order;
    for (int d = 0; d < nd - 1; ++d) order.push_back(st.axis(d));
    order.push_back(jo);
    for (const te::IterVar& r : st.all_reduce_axes()) order.push_back(r);
    order.push_back(ji);
    st.reorder(order);
    te::IterVar outer = jo;
    for (int d = nd - 2; d >= 0; --d) outer = st.fuse(st.axis(d), outer);
    st.vectorize(ji);
    st.cache_write_local();
    int64_t work = assumed_numel(t);  // symbolic dims at their assumed size
    for (const te::IterVar& r : st.all_reduce_axes()) work *= assumed(r->extent);
    if (work > kParallelMin && assumed(outer->extent) > 1) st.parallel(outer);
}

void reduce_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st) || st.all_reduce_axes().empty()) continue;
        const std::string& n = st.tensor()->name;
        const bool part = n.size() > 5 && n.compare(n.size() - 5, 5, "_part") == 0;
        if (part && st.all_reduce_axes().size() == 1)
            schedule_lane_partial(st, s.config());
        else if (reduces_columns(st))
            schedule_column_reduce(st, s.config());
    }
    default_schedule(s, outputs);
}

}  // namespace kiln::op
