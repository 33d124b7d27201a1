// prepare_externs_at (prepare_externs.h): the extern kernels of new dims, made in parallel.
#include "runtime/prepare_externs.h"

#include <algorithm>
#include <atomic>

#include "runtime/extern_kernel.h"
#include "runtime/run_control.h"

namespace kiln::runtime {
namespace {

struct Job {
    ExternKernel* kernel;
    std::vector<int64_t> dims;  // the step's (StepDesc::dims order)
};

struct Jobs {
    std::vector<Job> list;
    std::atomic<size_t> next{0};
    int threads = 1;
};

/// One of the parallel loop's iterations: a thread claiming kernels until none is left, so a
/// slow one does not hold the others back behind it.
void make_some(int64_t begin, int64_t end, void* ctx) {
    auto* jobs = static_cast<Jobs*>(ctx);
    for (int64_t t = begin; t < end; ++t)
        for (size_t i; (i = jobs->next++) < jobs->list.size();)
            jobs->list[i].kernel->prepare_at(jobs->list[i].dims.data(), jobs->threads);
}

}  // namespace

void prepare_externs_at(const Executable& exe, const std::vector<int64_t>& dims, const kiln_kernel_env& env) {
    Jobs jobs;
    for (const StepDesc& step : exe.steps) {
        if (step.kernel < 0 || !exe.kernels[static_cast<size_t>(step.kernel)].takes_dims) continue;
        ExternKernel* kernel = exe.extern_kernel(step.kernel);
        if (!kernel) continue;
        Job job{kernel, {}};
        for (int d : step.dims) job.dims.push_back(dims.at(static_cast<size_t>(d)));
        jobs.list.push_back(std::move(job));
    }
    if (jobs.list.size() < 2) return;  // nothing to make together
    jobs.threads = kernel_env_threads(env);
    const int64_t workers = std::min<int64_t>(jobs.threads, static_cast<int64_t>(jobs.list.size()));
    if (workers <= 1 || !env.parallel_for) {
        make_some(0, 1, &jobs);
        return;
    }
    env.parallel_for(env.pool, workers, make_some, &jobs);
}

}  // namespace kiln::runtime
