/* The C calling convention between generated kernels and the runtime. Generated sources embed an
 * identical copy of these declarations (codegen/c_emitter.cc); keep them in sync. */
#ifndef KILN_RUNTIME_KERNEL_ABI_H_
#define KILN_RUNTIME_KERNEL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A chunk of a parallel loop: iterations [begin, end). */
typedef void (*kiln_task_fn)(int64_t begin, int64_t end, void* ctx);

/* What the runtime hands every kernel call: its intra-op thread pool. */
typedef struct kiln_kernel_env {
    void* pool;
    /* Runs fn over [0, n) split into chunks across the pool's threads; returns when all are done. */
    void (*parallel_for)(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
    /* Preemption (NULL: the call is not preemptible). Non-zero once parallel_for stopped handing
     * out chunks because the run was asked to stop: the kernel then frees its temporaries and
     * returns KILN_KERNEL_STOPPED, and the runtime runs it again from its start later. */
    const volatile int32_t* stop;
} kiln_kernel_env;

/* What a kernel returns when it was cut short by env->stop (1: a failed allocation). */
#define KILN_KERNEL_STOPPED 2

/* A kernel: args are the data pointers of its buffers (inputs, then outputs). Returns 0 on success. */
typedef int32_t (*kiln_kernel_fn)(void* const* args, const kiln_kernel_env* env);

/* A kernel with symbolic dims (tir PrimFunc::dims): the same as kiln_kernel_fn plus the dims'
 * values, in the kernel's dims order; buffer sizes, strides and loop extents are computed from
 * them. The caller checks that each buffer holds the elements these dims need (the kernel only
 * refuses a negative dim, returning KILN_KERNEL_BAD_DIMS). A kernel without symbolic dims keeps
 * the kiln_kernel_fn signature. */
typedef int32_t (*kiln_kernel_dims_fn)(void* const* args, const int64_t* dims, const kiln_kernel_env* env);

/* What a kiln_kernel_dims_fn returns for a negative dim (it touched no buffer). */
#define KILN_KERNEL_BAD_DIMS 3

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_KERNEL_ABI_H_ */
