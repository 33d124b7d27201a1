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
// them the kernel keeps oneDNN's matmul (supported() is false).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::runtime::rnn {

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

private:
    int64_t k_ = 0, nq_ = 0, hp_ = 0;
    std::vector<float> w_;  // [ceil(hp / 8)][K][nq][8], zero past hp
};

}  // namespace kiln::runtime::rnn
