// Schedule primitives: each edits a stage's leaf list (the loop order) and records the relation
// between new and old iter vars; lowering (tir/lower.cc) recovers the original indices from the
// relations. Nothing here changes what is computed.
#include "te/schedule.h"

#include <algorithm>
#include <unordered_set>

#include "support/error.h"
#include "te/dims.h"

namespace kiln::te {

const char* loop_kind_name(LoopKind k) {
    switch (k) {
        case LoopKind::kSerial: return "serial";
        case LoopKind::kParallel: return "parallel";
        case LoopKind::kVectorized: return "vectorized";
        case LoopKind::kUnrolled: return "unrolled";
        case LoopKind::kBlockIdxX: return "blockIdx.x";
        case LoopKind::kThreadIdxX: return "threadIdx.x";
    }
    return "?";
}

Stage::Stage(Tensor t) : tensor_(std::move(t)) {
    KILN_CHECK(tensor_ && !tensor_->is_placeholder, kInvalidArgument)
        << "a stage needs a compute tensor, got placeholder '" << (tensor_ ? tensor_->name : "null")
        << "'";
    leaves_ = tensor_->axis;
    if (tensor_->body && tensor_->body->kind == ExprKind::kReduce) {
        reduce_axes_ = static_cast<const ReduceNode&>(*tensor_->body).axes;
    }
    leaves_.insert(leaves_.end(), reduce_axes_.begin(), reduce_axes_.end());
}

IterVar Stage::axis(size_t i) const {
    KILN_CHECK(i < tensor_->axis.size(), kInvalidArgument)
        << "stage '" << tensor_->name << "': axis " << i << " out of range (rank "
        << tensor_->axis.size() << ")";
    return tensor_->axis[i];
}

IterVar Stage::reduce_axis(size_t i) const {
    KILN_CHECK(i < reduce_axes_.size(), kInvalidArgument)
        << "stage '" << tensor_->name << "': reduce axis " << i << " out of range ("
        << reduce_axes_.size() << " reduce axes)";
    return reduce_axes_[i];
}

size_t Stage::leaf_pos(const IterVar& iv) const {
    auto it = std::find(leaves_.begin(), leaves_.end(), iv);
    KILN_CHECK(iv && it != leaves_.end(), kInvalidArgument)
        << "stage '" << tensor_->name << "': iter var '" << (iv ? iv->var->name : "null")
        << "' is not a current leaf loop (was it already split or fused?)";
    return static_cast<size_t>(it - leaves_.begin());
}

std::pair<IterVar, IterVar> Stage::split(const IterVar& iv, int64_t factor) {
    size_t pos = leaf_pos(iv);
    KILN_CHECK(factor > 0, kInvalidArgument)
        << "stage '" << tensor_->name << "': split of '" << iv->var->name
        << "' needs a factor > 0, got " << factor;
    IterVar outer, inner;
    int64_t f = factor;
    if (iv->is_static()) {
        // A factor beyond the extent would only add empty iterations.
        f = std::min(factor, std::max<int64_t>(iv->extent, 1));
        outer = make_iter_var(iv->var->name + "_o", (iv->extent + f - 1) / f, iv->is_reduce);
    } else {
        // ceil(E / f) tiles; lowering runs floordiv(E, f) full ones and a tail (tir/lower.cc).
        outer = make_iter_var(iv->var->name + "_o", floordiv(iv->sym_extent + (f - 1), int_imm(f)),
                              iv->is_reduce);
    }
    inner = make_iter_var(iv->var->name + "_i", f, iv->is_reduce);
    splits_.push_back({iv, outer, inner, f});
    leaves_[pos] = outer;
    leaves_.insert(leaves_.begin() + static_cast<long>(pos) + 1, inner);
    return {outer, inner};
}

std::pair<IterVar, IterVar> Stage::split_nparts(const IterVar& iv, int64_t nparts) {
    leaf_pos(iv);
    KILN_CHECK(nparts > 0, kInvalidArgument)
        << "stage '" << tensor_->name << "': split_nparts of '" << iv->var->name
        << "' needs nparts > 0, got " << nparts;
    KILN_CHECK(iv->is_static(), kInvalidArgument)
        << "stage '" << tensor_->name << "': split_nparts of '" << iv->var->name
        << "' needs a static extent (its factor would be symbolic; use split with a factor)";
    int64_t factor = std::max<int64_t>(1, (iv->extent + nparts - 1) / nparts);
    return split(iv, factor);
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
    size_t po = leaf_pos(outer), pi = leaf_pos(inner);
    KILN_CHECK(pi == po + 1, kInvalidArgument)
        << "stage '" << tensor_->name << "': fuse needs adjacent leaves with '" << outer->var->name
        << "' immediately outside '" << inner->var->name << "' (positions " << po << " and " << pi
        << ")";
    KILN_CHECK(outer->is_reduce == inner->is_reduce, kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot fuse reduce axis with data-parallel axis ('"
        << outer->var->name << "', '" << inner->var->name << "')";
    const std::string name = outer->var->name + "_" + inner->var->name + "_f";
    IterVar fused = outer->is_static() && inner->is_static()
                        ? make_iter_var(name, outer->extent * inner->extent, outer->is_reduce)
                        : make_iter_var(name, outer->extent_expr() * inner->extent_expr(), outer->is_reduce);
    fuses_.push_back({outer, inner, fused});
    leaves_[po] = fused;
    leaves_.erase(leaves_.begin() + static_cast<long>(pi));
    return fused;
}

void Stage::reorder(const std::vector<IterVar>& order) {
    std::vector<size_t> pos;
    std::unordered_set<const IterVarNode*> seen;
    for (const auto& iv : order) {
        pos.push_back(leaf_pos(iv));
        KILN_CHECK(seen.insert(iv.get()).second, kInvalidArgument)
            << "stage '" << tensor_->name << "': reorder lists '" << iv->var->name << "' twice";
    }
    std::vector<size_t> sorted = pos;
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 0; k < order.size(); ++k) leaves_[sorted[k]] = order[k];
}

void Stage::set_kind(const IterVar& iv, LoopKind k) {
    leaf_pos(iv);
    kinds_[iv.get()] = k;
}

void Stage::vectorize(const IterVar& iv) {
    leaf_pos(iv);
    // Vectorized loops promise independent iterations (the C emitter adds ivdep hints).
    KILN_CHECK(!iv->is_reduce, kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot vectorize reduce axis '" << iv->var->name
        << "' (iterations accumulate into the same element)";
    set_kind(iv, LoopKind::kVectorized);
}
void Stage::unroll(const IterVar& iv) {
    set_kind(iv, LoopKind::kUnrolled);
}
void Stage::parallel(const IterVar& iv) {
    leaf_pos(iv);
    KILN_CHECK(!iv->is_reduce, kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot parallelize reduce axis '" << iv->var->name
        << "' (iterations would race on the output)";
    set_kind(iv, LoopKind::kParallel);
}
void Stage::bind(const IterVar& iv, LoopKind thread) {
    leaf_pos(iv);
    KILN_CHECK(thread == LoopKind::kBlockIdxX || thread == LoopKind::kThreadIdxX, kInvalidArgument)
        << "stage '" << tensor_->name << "': bind takes blockIdx.x or threadIdx.x, got " << loop_kind_name(thread);
    KILN_CHECK(!iv->is_reduce, kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot bind reduce axis '" << iv->var->name
        << "' to a GPU index (threads would race on the output)";
    set_kind(iv, thread);
}

std::vector<IterVar> Stage::tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy) {
    leaf_pos(x);
    leaf_pos(y);
    KILN_CHECK(x != y, kInvalidArgument)
        << "stage '" << tensor_->name << "': tile needs two different axes";
    auto [xo, xi] = split(x, fx);
    auto [yo, yi] = split(y, fy);
    reorder({xo, yo, xi, yi});
    return {xo, yo, xi, yi};
}

void Stage::compute_inline() {
    KILN_CHECK(reduce_axes_.empty(), kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot inline a reduction";
    KILN_CHECK(!is_output_, kInvalidArgument)
        << "stage '" << tensor_->name << "': cannot inline an output";
    inlined_ = true;
}

void Stage::store_in(const Tensor& target) {
    KILN_CHECK(target && target->shape == tensor_->shape &&
                   same_dims(target->shape_exprs(), tensor_->shape_exprs()) && target->dtype == tensor_->dtype,
               kInvalidArgument)
        << "stage '" << tensor_->name << "': store_in needs a tensor of the same shape and dtype";
    KILN_CHECK(!inlined_ && !is_output_, kInvalidArgument)
        << "stage '" << tensor_->name << "': store_in applies to a materialized intermediate";
    storage_ = target;
}

void Stage::fuse_epilogue(Stage& epilogue) {
    KILN_CHECK(local_ && !reduce_axes_.empty(), kInvalidArgument)
        << "stage '" << tensor_->name << "': fuse_epilogue applies to a reduction accumulating in a local tile";
    KILN_CHECK(&epilogue != this && !epilogue.inlined_ && epilogue.reduce_axes_.empty() && !epilogue.fused_epilogue_,
               kInvalidArgument)
        << "stage '" << tensor_->name << "': the epilogue '" << epilogue.tensor_->name
        << "' must be a materialized elementwise stage";
    store_in(epilogue.tensor_);
    epilogue_ = epilogue.tensor_;
    epilogue.fused_epilogue_ = true;
}

void Stage::cache_write_local() {
    KILN_CHECK(!reduce_axes_.empty() && !inlined_, kInvalidArgument)
        << "stage '" << tensor_->name << "': cache_write_local applies to a materialized reduction";
    local_ = true;
}

void Stage::prefetch(const Tensor& t, const IterVar& at, std::vector<Expr> index) {
    leaf_pos(at);  // throws kInvalidArgument if `at` is not a loop of this stage
    KILN_CHECK(t && index.size() == t->shape.size(), kInvalidArgument)
        << "stage '" << tensor_->name << "': prefetch of " << (t ? t->name : std::string("a null tensor")) << " needs "
        << (t ? t->shape.size() : 0) << " index expressions, got " << index.size();
    prefetches_.push_back({t, at, std::move(index)});
}

LoopKind Stage::loop_kind(const IterVar& iv) const {
    auto it = kinds_.find(iv.get());
    return it == kinds_.end() ? LoopKind::kSerial : it->second;
}

Schedule::Schedule(std::vector<Tensor> outputs, ScheduleConfig config)
    : outputs_(std::move(outputs)), config_(std::move(config)) {
    std::unordered_set<const TensorNode*> outs;
    for (const auto& o : outputs_) {
        KILN_CHECK(o != nullptr, kInvalidArgument) << "create_schedule: null output tensor";
        outs.insert(o.get());
    }
    for (const auto& t : post_order(outputs_)) {
        if (t->is_placeholder) continue;
        stages_.emplace_back(t);
        stages_.back().is_output_ = outs.count(t.get()) > 0;
    }
}

Stage& Schedule::operator[](const Tensor& t) {
    for (auto& s : stages_)
        if (s.tensor() == t) return s;
    KILN_THROW(kInvalidArgument) << "schedule has no stage for tensor '" << (t ? t->name : "null")
                                 << "'";
}

const Stage& Schedule::operator[](const Tensor& t) const {
    for (const auto& s : stages_)
        if (s.tensor() == t) return s;
    KILN_THROW(kInvalidArgument) << "schedule has no stage for tensor '" << (t ? t->name : "null")
                                 << "'";
}

bool Schedule::has_stage(const Tensor& t) const {
    for (const auto& s : stages_)
        if (s.tensor() == t) return true;
    return false;
}

}  // namespace kiln::te
