#include "runtime/batchnorm_training_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/executable.h"
#include "support/error.h"

// The 32-byte vectors below never cross a non-inlined call boundary of another translation unit;
// GCC's note that their ABI differs with and without AVX does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::runtime {
namespace {

// 4 or 8 floats as one value (GCC/Clang vector extension), so the loops are branch-free and
// vectorized at any -march; the ReLU mask is a bitwise and. The runtime is built for the
// baseline ISA, where 8-float vectors' compares lower to scalar code (the masked gradient ran
// 1.7x the unmasked one's time): each channel runs on V4 (SSE2) or, where the CPU has AVX2, on
// V8 in a function built for it (channel_avx2 below).
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
#define KILN_BN_INLINE inline __attribute__((always_inline))
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_BN_AVX2 __attribute__((target("avx2")))
bool have_avx2() { return __builtin_cpu_supports("avx2"); }
#else
#define KILN_BN_AVX2
bool have_avx2() { return false; }
#endif

template <typename V>
struct Simd;
template <>
struct Simd<V4> {
    using I = I4;
};
template <>
struct Simd<V8> {
    using I = I8;
};
template <typename V>
constexpr int kLanes = sizeof(V) / sizeof(float);

template <typename V>
KILN_BN_INLINE V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <typename V>
KILN_BN_INLINE void store(float* p, V v) {
    std::memcpy(p, &v, sizeof v);
}
template <typename V>
KILN_BN_INLINE V splat(float f) {
    return V{} + f;
}
template <typename V>
KILN_BN_INLINE float hsum(V v) {
    float t = 0;
    for (int l = 0; l < kLanes<V>; ++l) t += v[l];
    return t;
}
// dY where r > 0, else 0.
template <typename V>
KILN_BN_INLINE V masked(V dy, V r) {
    using I = typename Simd<V>::I;
    return reinterpret_cast<V>(reinterpret_cast<I>(dy) & (r > splat<V>(0.0f)));
}
inline float masked(float dy, float r) { return r > 0.0f ? dy : 0.0f; }

// The sums of one channel: over x - k, (x - k)^2, and for the gradient dY and dY (x - k).
struct Sums {
    double s1 = 0, s2 = 0, g1 = 0, g2 = 0;
};

// Adds one plane's sums. kGrad: also the dY sums; kMask: dY counts where r > 0 only.
template <typename V, bool kGrad, bool kMask>
KILN_BN_INLINE void plane_sums(const float* x, const float* dy, const float* r, int64_t len, float k, Sums& s) {
    V a = {}, b = {}, c = {}, d = {};
    const V kv = splat<V>(k);
    int64_t i = 0;
    for (; i + kLanes<V> <= len; i += kLanes<V>) {
        const V t = load<V>(x + i) - kv;
        a += t;
        b += t * t;
        if constexpr (kGrad) {
            const V g = kMask ? masked(load<V>(dy + i), load<V>(r + i)) : load<V>(dy + i);
            c += g;
            d += g * t;
        }
    }
    float ta = hsum(a), tb = hsum(b), tc = hsum(c), td = hsum(d);
    for (; i < len; ++i) {
        const float t = x[i] - k;
        ta += t;
        tb += t * t;
        if constexpr (kGrad) {
            const float g = kMask ? masked(dy[i], r[i]) : dy[i];
            tc += g;
            td += g * t;
        }
    }
    s.s1 += ta;
    s.s2 += tb;
    s.g1 += tc;
    s.g2 += td;
}

// y = x a + b over one plane (the forward's pass 2); kRelu: max(y, 0) (NaN stays NaN, as
// Kiln's Relu keeps it).
template <typename V, bool kRelu>
KILN_BN_INLINE void affine(const float* x, float* y, int64_t len, float a, float b) {
    using I = typename Simd<V>::I;
    const V av = splat<V>(a), bv = splat<V>(b), zero = splat<V>(0.0f);
    int64_t i = 0;
    for (; i + kLanes<V> <= len; i += kLanes<V>) {
        const V v = load<V>(x + i) * av + bv;
        store(y + i, kRelu ? reinterpret_cast<V>(reinterpret_cast<I>(v) & ~(v < zero)) : v);
    }
    for (; i < len; ++i) {
        const float v = x[i] * a + b;
        y[i] = kRelu && v < 0.0f ? 0.0f : v;
    }
}

// dx = k g + a x + b over one plane, g = dY (masked by r > 0 with kMask): the gradient's pass 2.
template <typename V, bool kMask>
KILN_BN_INLINE void grad_plane(const float* x, const float* dy, const float* r, float* dx, int64_t len, float k,
                               float a, float b) {
    const V kv = splat<V>(k), av = splat<V>(a), bv = splat<V>(b);
    int64_t i = 0;
    for (; i + kLanes<V> <= len; i += kLanes<V>) {
        const V g = kMask ? masked(load<V>(dy + i), load<V>(r + i)) : load<V>(dy + i);
        store(dx + i, kv * g + av * load<V>(x + i) + bv);
    }
    for (; i < len; ++i) dx[i] = k * (kMask ? masked(dy[i], r[i]) : dy[i]) + a * x[i] + b;
}

struct Geometry {
    int64_t n = 0, c = 0, hw = 0;
    int64_t count() const { return n * hw; }
    int64_t at(int64_t plane, int64_t channel) const { return (plane * c + channel) * hw; }
};

// The channel's batch mean and population variance from its shifted sums.
void stats(const Sums& s, const Geometry& g, double& mean, double& var, float k) {
    const double m = static_cast<double>(g.count()), d = s.s1 / m;
    mean = k + d;
    var = std::max(0.0, s.s2 / m - d * d);
}

Geometry geometry(const ExternParams& p, const std::vector<ExternArg>& args, int64_t x) {
    Geometry g{p.integer("n"), p.integer("c"), p.integer("hw")};
    KILN_CHECK(x >= 0 && x < static_cast<int64_t>(args.size()) && g.n >= 1 && g.c >= 1 && g.hw >= 1 &&
                   shape_numel(args[x].shape) == g.n * g.c * g.hw,
               kInvalidModel)
        << "BatchNormalization kernel: X does not match n " << g.n << ", c " << g.c << ", hw " << g.hw;
    return g;
}

// Checks argument `i` exists, is float32 and has `numel` elements.
int64_t checked(const ExternParams& p, const std::vector<ExternArg>& args, const char* key, int64_t numel) {
    const int64_t i = p.integer(key);
    KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()) && args[i].dtype == DType::kFloat32 &&
                   shape_numel(args[i].shape) == numel,
               kInvalidModel)
        << "BatchNormalization kernel: argument '" << key << "' (" << i << ") is not float32 of " << numel << " elements";
    return i;
}

// Runs fn(channel) for every channel, on the pool when the work is worth it.
template <typename Job>
Status for_channels(const Geometry& g, const kiln_kernel_env& env, Job& job) {
    auto body = [](int64_t b, int64_t e, void* ctx) {
        for (int64_t ch = b; ch < e; ++ch) static_cast<Job*>(ctx)->channel(ch);
    };
    if (env.parallel_for && g.c > 1 && g.n * g.c * g.hw >= (1 << 14)) {
        env.parallel_for(env.pool, g.c, body, &job);
        if (env.stop && *env.stop) return kernel_stopped_status();
    } else {
        body(0, g.c, &job);
    }
    return Status::ok_status();
}

class BnTrain final : public ExternKernel {
public:
    BnTrain(const ExternParams& p, const std::vector<ExternArg>& args) : g_(geometry(p, args, p.integer("x"))) {
        const int64_t all = g_.n * g_.c * g_.hw;
        const char* keys[8] = {"x", "scale", "bias", "mean", "var", "y", "rmean", "rvar"};
        for (int k = 0; k < 8; ++k) arg_[k] = checked(p, args, keys[k], k == 0 || k == 5 ? all : g_.c);
        eps_ = std::stod(p.str("epsilon"));
        momentum_ = std::stod(p.str("momentum"));
        relu_ = p.integer_or("relu", 0) != 0;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        Job job{this, {}};
        for (int k = 0; k < 8; ++k) job.a[k] = static_cast<float*>(args[arg_[k]]);
        return for_channels(g_, env, job);
    }

private:
    struct Job {
        const BnTrain* self;
        float* a[8];  // x, scale, bias, mean, var, y, rmean, rvar
        void channel(int64_t ch) const {
            if (self->avx2_) channel_avx2(ch);
            else channel_on<V4>(ch);
        }
        KILN_BN_AVX2 void channel_avx2(int64_t ch) const { channel_on<V8>(ch); }

        template <typename V>
        KILN_BN_INLINE void channel_on(int64_t ch) const {
            const Geometry& g = self->g_;
            const float* x = a[0];
            const float k = x[g.at(0, ch)];
            Sums s;
            for (int64_t p = 0; p < g.n; ++p)
                plane_sums<V, false, false>(x + g.at(p, ch), nullptr, nullptr, g.hw, k, s);
            double mean, var;
            stats(s, g, mean, var, k);
            const double inv = a[1][ch] / std::sqrt(var + self->eps_);
            const float fi = static_cast<float>(inv), fs = static_cast<float>(a[2][ch] - mean * inv);
            for (int64_t p = 0; p < g.n; ++p) {
                if (self->relu_) affine<V, true>(x + g.at(p, ch), a[5] + g.at(p, ch), g.hw, fi, fs);
                else affine<V, false>(x + g.at(p, ch), a[5] + g.at(p, ch), g.hw, fi, fs);
            }
            const double mo = self->momentum_;
            a[6][ch] = static_cast<float>(a[3][ch] * mo + mean * (1 - mo));
            a[7][ch] = static_cast<float>(a[4][ch] * mo + var * (1 - mo));
        }
    };

    Geometry g_;
    int64_t arg_[8] = {};
    double eps_ = 1e-5, momentum_ = 0.9;
    bool relu_ = false;  // y = max(x inv + shift, 0)
    bool avx2_ = have_avx2();
};

class BnGrad final : public ExternKernel {
public:
    BnGrad(const ExternParams& p, const std::vector<ExternArg>& args) : g_(geometry(p, args, p.integer("x"))) {
        const int64_t all = g_.n * g_.c * g_.hw;
        const char* keys[6] = {"x", "dy", "scale", "dx", "dscale", "dbias"};
        for (int k = 0; k < 6; ++k) arg_[k] = checked(p, args, keys[k], k == 2 || k > 3 ? g_.c : all);
        r_ = p.integer_or("r", -1);
        if (r_ >= 0) r_ = checked(p, args, "r", all);
        eps_ = std::stod(p.str("epsilon"));
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        Job job{this, {}, r_ >= 0 ? static_cast<const float*>(args[r_]) : nullptr};
        for (int k = 0; k < 6; ++k) job.a[k] = static_cast<float*>(args[arg_[k]]);
        return for_channels(g_, env, job);
    }

private:
    struct Job {
        const BnGrad* self;
        float* a[6];  // x, dy, scale, dx, dscale, dbias
        const float* r;
        void channel(int64_t ch) const {
            if (self->avx2_) channel_avx2(ch);
            else r ? run<V4, true>(ch) : run<V4, false>(ch);
        }
        KILN_BN_AVX2 void channel_avx2(int64_t ch) const { r ? run<V8, true>(ch) : run<V8, false>(ch); }

        template <typename V, bool kMask>
        KILN_BN_INLINE void run(int64_t ch) const {
            const Geometry& g = self->g_;
            const float k = a[0][g.at(0, ch)];
            Sums s;
            for (int64_t p = 0; p < g.n; ++p) {
                const int64_t o = g.at(p, ch);
                plane_sums<V, true, kMask>(a[0] + o, a[1] + o, kMask ? r + o : nullptr, g.hw, k, s);
            }
            double mean, var;
            stats(s, g, mean, var, k);
            const double m = static_cast<double>(g.count()), invstd = 1 / std::sqrt(var + self->eps_);
            const double dscale = invstd * (s.g2 - (mean - k) * s.g1), kk = a[2][ch] * invstd;
            // dX = kk (dY - dB / m - xhat dscale / m) = kk dY + ax x + b.
            const double ax = -kk * invstd * dscale / m, b = -kk * s.g1 / m - ax * mean;
            const float fk = static_cast<float>(kk), fa = static_cast<float>(ax), fb = static_cast<float>(b);
            for (int64_t p = 0; p < g.n; ++p) {
                const int64_t o = g.at(p, ch);
                grad_plane<V, kMask>(a[0] + o, a[1] + o, kMask ? r + o : nullptr, a[3] + o, g.hw, fk, fa, fb);
            }
            a[4][ch] = static_cast<float>(dscale);
            a[5][ch] = static_cast<float>(s.g1);
        }
    };

    Geometry g_;
    int64_t arg_[6] = {};
    int64_t r_ = -1;
    double eps_ = 1e-5;
    bool avx2_ = have_avx2();
};

}  // namespace

std::unique_ptr<ExternKernel> make_bn_train_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<BnTrain>(p, args);
}

std::unique_ptr<ExternKernel> make_bn_grad_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<BnGrad>(p, args);
}

}  // namespace kiln::runtime
