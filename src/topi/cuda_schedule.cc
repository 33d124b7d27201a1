#include "topi/cuda_schedule.h"

namespace kiln::topi {

int64_t cuda_block_size(int64_t extent) {
    if (extent <= kCudaThreads) return extent;
    for (int64_t d = kCudaThreads; d >= kCudaThreads / 2; --d)
        if (extent % d == 0) return d;
    return kCudaThreads;
}

void cuda_default_schedule(te::Schedule& sch) {
    for (te::Stage& st : sch.stages()) {
        if (st.is_inlined()) continue;
        const size_t n = st.tensor()->axis.size();
        if (n == 0) continue;
        te::IterVar fused = st.axis(0);
        for (size_t i = 1; i < n; ++i) fused = st.fuse(fused, st.axis(i));
        auto [block, thread] = st.split(fused, fused->is_static() ? cuda_block_size(fused->extent) : kCudaThreads);
        st.bind(block, te::LoopKind::kBlockIdxX);
        st.bind(thread, te::LoopKind::kThreadIdxX);
    }
}

}  // namespace kiln::topi
