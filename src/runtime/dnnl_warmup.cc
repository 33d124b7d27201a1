// start_dnnl_warmup (dnnl_warmup.h): one small sgemm on a thread of its own, once per process.
#include "runtime/dnnl_warmup.h"

#include <future>
#include <mutex>
#include <vector>

#if KILN_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#endif

namespace kiln::runtime {
namespace {

std::once_flag g_started;

}  // namespace

std::future<void> start_dnnl_warmup() {
    std::future<void> done;
#if KILN_HAVE_DNNL
    std::call_once(g_started, [&] {
        done = std::async(std::launch::async, [] {
            omp_set_num_threads(1);  // as Kiln runs oneDNN: no OpenMP team
            const int n = 64;
            std::vector<float> a(n * n, 0.f), b(n * n, 0.f), c(n * n, 0.f);
            (void)dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
        });
    });
#endif
    return done;
}

}  // namespace kiln::runtime
