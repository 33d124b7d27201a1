// Activations and gate updates of the fused recurrent kernel (see rnn_gates.h).
//
// NOTE: the runtime is built for the baseline x86-64 ISA (an artifact runs on other machines), so
// the loops here are cloned per ISA with target_clones and vectorized with -O3's vectorizer
// (the file's optimize pragma): -O2 alone leaves most of them scalar.
#include "runtime/rnn_gates.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "support/error.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define KILN_RNN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_RNN_CLONES
#endif

namespace kiln::runtime::rnn {
namespace {

/// e^x for x clamped to [-87.3, 88.3]: 2^n * p(r), r = x - n ln2 (Cephes' expf polynomial).
inline float exp_poly(float x) {
    x = std::min(std::max(x, -87.3f), 88.3f);
    const float t = x * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (|t| < 2^22)
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }
inline float tanh_poly(float x) { return 1.0f - 2.0f / (exp_poly(2.0f * x) + 1.0f); }

KILN_RNN_CLONES void clip_all(float* x, int64_t n, float clip) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], -clip), clip);
}
KILN_RNN_CLONES void sigmoid_all(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = sigmoid(x[i]);
}
KILN_RNN_CLONES void tanh_all(float* x, int64_t n, float alpha, float beta) {
    for (int64_t i = 0; i < n; ++i) x[i] = alpha * tanh_poly(beta * x[i]);
}
KILN_RNN_CLONES void elu_all(float* x, int64_t n, float alpha) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0 ? x[i] : alpha * (exp_poly(x[i]) - 1.0f);
}
KILN_RNN_CLONES void piecewise_all(ActKind k, float* x, int64_t n, float a, float b) {
    switch (k) {
        case ActKind::kRelu:
            for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
            break;
        case ActKind::kAffine:
            for (int64_t i = 0; i < n; ++i) x[i] = a * x[i] + b;
            break;
        case ActKind::kLeakyRelu:
            for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0 ? x[i] : a * x[i];
            break;
        case ActKind::kThresholdedRelu:
            for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= a ? x[i] : 0.0f;
            break;
        case ActKind::kHardSigmoid:
            for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(a * x[i] + b, 0.0f), 1.0f);
            break;
        case ActKind::kSoftsign:
            for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::fabs(x[i]));
            break;
        default:
            break;
    }
}

}  // namespace

Activation parse_activation(const std::string& text) {
    static const std::pair<const char*, ActKind> kNames[] = {
        {"Relu", ActKind::kRelu},           {"Tanh", ActKind::kTanh},
        {"Sigmoid", ActKind::kSigmoid},     {"Affine", ActKind::kAffine},
        {"LeakyRelu", ActKind::kLeakyRelu}, {"ThresholdedRelu", ActKind::kThresholdedRelu},
        {"ScaledTanh", ActKind::kScaledTanh}, {"HardSigmoid", ActKind::kHardSigmoid},
        {"Elu", ActKind::kElu},             {"Softsign", ActKind::kSoftsign},
        {"Softplus", ActKind::kSoftplus}};
    const size_t c1 = text.find(':'), c2 = c1 == std::string::npos ? c1 : text.find(':', c1 + 1);
    KILN_CHECK(c2 != std::string::npos, kInvalidModel) << "rnn activation '" << text << "': expected NAME:ALPHA:BETA";
    const std::string name = text.substr(0, c1);
    Activation a;
    a.alpha = std::strtof(text.c_str() + c1 + 1, nullptr);
    a.beta = std::strtof(text.c_str() + c2 + 1, nullptr);
    for (const auto& [n, k] : kNames)
        if (name == n) {
            a.kind = k;
            return a;
        }
    KILN_CHECK(false, kInvalidModel) << "rnn activation '" << name << "' is not known";
    return a;
}

void activate(const Activation& f, float clip, float* x, int64_t n) {
    if (clip > 0) clip_all(x, n, clip);
    switch (f.kind) {
        case ActKind::kSigmoid: sigmoid_all(x, n); break;
        case ActKind::kTanh: tanh_all(x, n, 1.0f, 1.0f); break;
        case ActKind::kScaledTanh: tanh_all(x, n, f.alpha, f.beta); break;
        case ActKind::kElu: elu_all(x, n, f.alpha); break;
        case ActKind::kSoftplus:  // rare: libm, stable form max(x, 0) + log1p(exp(-|x|))
            for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f) + std::log1p(std::exp(-std::fabs(x[i])));
            break;
        default: piecewise_all(f.kind, x, n, f.alpha, f.beta); break;
    }
}

KILN_RNN_CLONES void add2(float* x, const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += a[i] + b[i];
}
KILN_RNN_CLONES void add_mul(float* x, const float* p, const float* c, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += p[i] * c[i];
}
KILN_RNN_CLONES void one_minus(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.0f - x[i];
}
KILN_RNN_CLONES void lstm_cell(float* c_new, const float* f, const float* c_prev, const float* i, const float* g,
                               int64_t n) {
    for (int64_t k = 0; k < n; ++k) c_new[k] = f[k] * c_prev[k] + i[k] * g[k];
}
KILN_RNN_CLONES void mul(float* y, const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
KILN_RNN_CLONES void gru_blend(float* h, const float* z, const float* ht, const float* h_prev, int64_t n) {
    for (int64_t i = 0; i < n; ++i) h[i] = (1.0f - z[i]) * ht[i] + z[i] * h_prev[i];
}
KILN_RNN_CLONES void gru_lbr_pre(float* pre, const float* xh, const float* bh, const float* r, const float* rec,
                                 const float* rbh, int64_t n) {
    if (rbh) {
        for (int64_t i = 0; i < n; ++i) pre[i] = xh[i] + bh[i] + r[i] * (rec[i] + rbh[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) pre[i] = xh[i] + bh[i] + r[i] * rec[i];
    }
}

}  // namespace kiln::runtime::rnn
