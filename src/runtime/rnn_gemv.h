// The recurrent matrix-vector product of the fused recurrent kernel (rnn_kernel.h) at batch 1:
// y[q * hp + j] = sum_k h[k] * R[(q0 + q) * H + j0 + j][k] for the gates q < nq and the hidden
// units j < hp of one part.
//
// Why not oneDNN's matmul there: at batch 1 a step is a GEMV over the whole recurrent weight
// (1 MiB at H=256 for LSTM), bound by the L2 bandwidth; oneDNN's per-call dispatch (about a
// microsecond) and its M=1 kernel cost 15-30 % on top at H=128-256, and the step count multiplies
// that. Here the weights are packed once at load into one contiguous stream per block of 8 units
// ([block][k][gate][8]), so a step reads exactly the weights, in order, with the gates of a unit
// block side by side in registers. AVX2 + FMA (cloned at load by the CPU's features); without
// them the kernel keeps oneDNN's matmul (supported() is false). With AVX-512 and two or four
// gates, one 512-bit load takes two gates of a block (their 16 floats are adjacent), and the
// packed weights start on a cache line so no load straddles two.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace kiln::runtime::rnn {

/// Storage on 64-byte boundaries (a cache line, and an AVX-512 load's width).
template <typename T>
struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <typename U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}
    T* allocate(size_t n) {
        void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <typename U>
    bool operator==(const CacheLineAllocator<U>&) const { return true; }
};

class PackedGemv {
public:
    PackedGemv() = default;
    /// Packs the rows of gates [q0, q0 + nq) and units [j0, j0 + hp) of r ([gates * H, K]
    /// row-major, row q * H + j), K = the length of h. nq is 1 to 4.
    PackedGemv(const float* r, int64_t H, int64_t K, int64_t q0, int64_t nq, int64_t j0, int64_t hp);
    /// y[q * hp + j] for q < nq, j < hp (y is nq * hp floats); h is K floats. backward: the unit
    /// blocks last to first (alternated per step, so that a step starts on the weights the one
    /// before ended on, still in L2: in order, weights a little larger than L2 all miss it).
    void run(const float* h, float* y, bool backward = false) const;
    bool empty() const { return w_.empty(); }
    /// Whether this CPU runs the packed kernel (AVX2 and FMA).
    static bool supported();
    /// Whether run() takes the AVX-512 kernel (this CPU has AVX-512F, two or four gates, and
    /// KILN_RNN_GEMV_AVX512 is not 0); off: the AVX2 one (tests run both).
    bool avx512() const { return avx512_; }
    void set_avx512(bool on);

private:
    int64_t k_ = 0, nq_ = 0, hp_ = 0;
    std::vector<float, CacheLineAllocator<float>> w_;  // [ceil(hp / 8)][K][nq][8], zero past hp
    bool avx512_ = false;
};

}  // namespace kiln::runtime::rnn
