// The elementwise half of the fused recurrent kernel (rnn_kernel.h): activation functions over
// arrays and the gate updates of one batch row's slice of hidden units. Plain loops over float
// arrays, compiled for AVX-512, AVX2 and a baseline and dispatched at load (target_clones); the
// exponential is a branch-free polynomial (relative error about 1e-7) so that Sigmoid / Tanh
// vectorize where libm's would be scalar calls.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::runtime::rnn {

enum class ActKind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                     kSoftsign, kSoftplus };

struct Activation {
    ActKind kind = ActKind::kTanh;
    float alpha = 0, beta = 0;
};

/// "Name:alpha:beta" (the canonical ONNX names of op/defs/recurrent.cc); kInvalidModel if unknown.
Activation parse_activation(const std::string& text);

/// x[i] = f(clip(x[i])) for i < n; clip <= 0: none.
void activate(const Activation& f, float clip, float* x, int64_t n);

/// x[i] += a[i] + b[i] (the input projection and the bias onto the recurrent product).
void add2(float* x, const float* a, const float* b, int64_t n);
/// x[i] += p[i] * c[i] (a peephole).
void add_mul(float* x, const float* p, const float* c, int64_t n);
/// y[i] = 1 - x[i] (LSTM's coupled forget gate).
void one_minus(float* y, const float* x, int64_t n);
/// c_new[i] = f[i] * c_prev[i] + i[i] * g[i].
void lstm_cell(float* c_new, const float* f, const float* c_prev, const float* i, const float* g, int64_t n);
/// y[i] = a[i] * b[i].
void mul(float* y, const float* a, const float* b, int64_t n);
/// h[i] = (1 - z[i]) * ht[i] + z[i] * h_prev[i].
void gru_blend(float* h, const float* z, const float* ht, const float* h_prev, int64_t n);
/// GRU with linear_before_reset: pre[i] = xh[i] + bh[i] + r[i] * (rec[i] + rbh[i]) (rbh may be null).
void gru_lbr_pre(float* pre, const float* xh, const float* bh, const float* r, const float* rec, const float* rbh,
                 int64_t n);

}  // namespace kiln::runtime::rnn
