#include "topi/cuda_schedule.h"

namespace kiln::topi {

void cuda_default_schedule(te::Schedule& sch) {
    for (te::Stage& st : sch.stages()) {
        if (st.is_inlined()) continue;
        const size_t n = st.tensor()->axis.size();
        if (n == 0) continue;
        te::IterVar fused = st.axis(0);
        for (size_t i = 1; i < n; ++i) fused = st.fuse(fused, st.axis(i));
        auto [block, thread] = st.split(fused, kCudaThreads);
        st.bind(block, te::LoopKind::kBlockIdxX);
        st.bind(thread, te::LoopKind::kThreadIdxX);
    }
}

}  // namespace kiln::topi
