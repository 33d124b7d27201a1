// OpDef helpers and the generic CPU schedule.
//
// default_schedule: for every non-inlined stage that the op's own schedule left untouched,
//  - injective stage: fuse all data-parallel axes into one loop, split it by a vector width
//    (64 bytes of elements) and vectorize the inner loop; the outer loop runs in parallel when
//    the stage has more than kParallelMin elements;
//    knobs (one value for every such stage of the kernel): "ew.vec" the inner loop's length in
//    vector widths {1, 2, 4} (default 1), "ew.par" whether the outer loop runs in parallel
//    {0, 1} (default 1, declared only for a stage large enough to run in parallel);
//  - reduction stage: fuse the data-parallel axes (outside the reduce loops) and run them in
//    parallel when the total work is large; reduce loops stay serial innermost.
#include "op/op_def.h"

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

bool stage_untouched(const te::Stage& st) {
    if (st.is_inlined() || st.writes_local() || !st.splits().empty() || !st.fuses().empty()) return false;
    for (const auto& iv : st.leaf_iter_vars())
        if (st.loop_kind(iv) != te::LoopKind::kSerial) return false;
    return true;
}

int64_t vector_width(DType t) {
    int64_t w = 64 / static_cast<int64_t>(dtype_size(te::compute_dtype(t)));
    return w > 16 ? 16 : w;
}

void schedule_injective(te::Stage& st, te::ScheduleConfig& cfg) {
    const te::Tensor& t = st.tensor();
    if (t->ndim() == 0) return;
    te::IterVar f = st.axis(0);
    for (int i = 1; i < t->ndim(); ++i) f = st.fuse(f, st.axis(i));
    int64_t n = t->numel();
    int64_t w = vector_width(t->dtype);
    if (n <= w) {
        if (n > 1) st.vectorize(f);
        return;
    }
    w *= cfg.knob("ew.vec", {1, 2, 4}, 1);
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
    te::IterVar f = st.axis(0);
    for (int i = 1; i < nd - 1; ++i) f = st.fuse(f, st.axis(i));
    if (t->shape[nd - 1] > 1) st.vectorize(st.axis(nd - 1));
    if (t->numel() > kParallelMin && t->numel() / t->shape[nd - 1] > 1) st.parallel(f);
}

void schedule_reduction(te::Stage& st) {
    const te::Tensor& t = st.tensor();
    if (t->ndim() == 0) return;
    te::IterVar f = st.axis(0);
    for (int i = 1; i < t->ndim(); ++i) f = st.fuse(f, st.axis(i));
    int64_t work = t->numel();
    for (const auto& r : st.all_reduce_axes()) work *= r->extent;
    if (t->numel() > 1 && work > kParallelMin) st.parallel(f);
}

void default_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st)) continue;
        if (st.all_reduce_axes().empty())
            schedule_injective(st, s.config());
        else
            schedule_reduction(st);
    }
}

}  // namespace kiln::op
