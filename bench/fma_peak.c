// FP32 FMA peak probe: the most FLOP/s this machine's cores sustain, measured, not read from
// /proc/cpuinfo. Each thread runs independent chains of vector FMAs (acc = acc * b + c) held in
// registers: enough chains (12) to cover FMA latency x pipes (4 cycles x 2 pipes = 8 on Zen 4 and
// most Intel cores), so throughput, not latency, bounds the loop. Built with -O2 -march=native by
// bench/fma_peak.py; AVX-512 and AVX2 widths are measured when the compiler targets them, each
// in its own process (NOTE: on the Zen 5 this was written on, an AVX2 loop run after AVX-512 code
// in the same process ran at a quarter of its speed).
//
// The rate is FLOPs over each thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), summed over the
// threads: on a shared machine, time a thread spends descheduled does not count against the
// hardware, while two threads sharing one core (SMT) still see their shared pipes. The wall-clock
// rate is printed after it.
//
//   fma_peak avx512|avx2 THREADS  ->  "<isa> <threads> <GFLOP/s by CPU time> <GFLOP/s by wall>"
//   (best of 5 trials of ~0.05 s each)
//   exit status 3: the ISA is not compiled in (the compiler does not target it)
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHAINS 12

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }

typedef struct {
    long iters;
    int isa;  // 0: AVX-512, 1: AVX2
    float sink;
    double cpu_s;  // this thread's CPU time in the loop
    pthread_barrier_t* barrier;
} Job;

#ifdef __AVX512F__
static float run_avx512(long iters) {
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.01f * i);
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long n = 0; n < iters; ++n) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}
#endif

#ifdef __AVX2__
static float run_avx2(long iters) {
    __m256 acc[CHAINS];
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_set1_ps(1.0f + 0.01f * i);
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long n = 0; n < iters; ++n) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
    }
    float out[8];
    __m256 s = acc[0];
    for (int i = 1; i < CHAINS; ++i) s = _mm256_add_ps(s, acc[i]);
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}
#endif

static void* worker(void* p) {
    Job* job = p;
    pthread_barrier_wait(job->barrier);
    double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
#ifdef __AVX512F__
    if (job->isa == 0) job->sink = run_avx512(job->iters);
#endif
#ifdef __AVX2__
    if (job->isa == 1) job->sink = run_avx2(job->iters);
#endif
    job->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    pthread_barrier_wait(job->barrier);
    return NULL;
}

// Wall time of `threads` threads each running `iters` iterations, started together; the sum of
// the threads' iterations per CPU second goes to *iters_per_cpu_s.
static double timed(int isa, int threads, long iters, double* iters_per_cpu_s) {
    pthread_t tid[64];
    Job jobs[64];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, threads + 1);
    for (int t = 0; t < threads; ++t) {
        jobs[t] = (Job){iters, isa, 0.0f, 0.0, &barrier};
        pthread_create(&tid[t], NULL, worker, &jobs[t]);
    }
    pthread_barrier_wait(&barrier);
    double t0 = now();
    pthread_barrier_wait(&barrier);
    double dt = now() - t0;
    double rate = 0;
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        rate += (double)iters / jobs[t].cpu_s;
    }
    if (iters_per_cpu_s) *iters_per_cpu_s = rate;
    pthread_barrier_destroy(&barrier);
    volatile float keep = jobs[0].sink;  // results are used: the loop cannot be removed
    (void)keep;
    return dt;
}

static void measure(int isa, const char* name, int lanes, int threads) {
    long iters = 1 << 20;
    while (timed(isa, threads, iters, NULL) < 0.05) iters *= 2;  // ~0.05-0.1 s per trial
    const double flops_per_iter = 2.0 * lanes * CHAINS;
    double best_cpu = 0, best_wall = 0;
    for (int trial = 0; trial < 5; ++trial) {
        double rate;
        double dt = timed(isa, threads, iters, &rate);
        double wall = flops_per_iter * (double)iters * threads / dt * 1e-9;
        double cpu = flops_per_iter * rate * 1e-9;
        if (wall > best_wall) best_wall = wall;
        if (cpu > best_cpu) best_cpu = cpu;
    }
    printf("%s %d %.1f %.1f\n", name, threads, best_cpu, best_wall);
}

int main(int argc, char** argv) {
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    if (argc != 3 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: fma_peak avx512|avx2 THREADS (1..64)\n");
        return 2;
    }
#ifdef __AVX512F__
    if (strcmp(argv[1], "avx512") == 0) return measure(0, "avx512", 16, threads), 0;
#endif
#ifdef __AVX2__
    if (strcmp(argv[1], "avx2") == 0) return measure(1, "avx2", 8, threads), 0;
#endif
    return 3;
}
