// run_extern_parts (extern_parts.h).
#include "runtime/extern_parts.h"

#include <mutex>

namespace kiln::runtime {

Status run_extern_parts(const kiln_kernel_env& env, int64_t n, const std::function<Status(int64_t)>& run_part) {
    struct Ctx {
        const std::function<Status(int64_t)>* run_part;
        std::mutex mu;
        Status first = Status::ok_status();
    } ctx{&run_part, {}};
    env.parallel_for(env.pool, n,
                     [](int64_t b, int64_t e, void* c) {
                         auto* x = static_cast<Ctx*>(c);
                         for (int64_t i = b; i < e; ++i) {
                             Status st = (*x->run_part)(i);
                             if (st.ok()) continue;
                             std::lock_guard<std::mutex> lock(x->mu);
                             if (x->first.ok()) x->first = st;
                         }
                     },
                     &ctx);
    return ctx.first;
}

}  // namespace kiln::runtime
