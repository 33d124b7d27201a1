#include "runtime/maxpool_kernel.h"

// The vectors below never cross a non-inlined call boundary of another translation unit (the
// AVX2 one lives inside scan_avx2): GCC's note that their ABI differs with AVX does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

// One spatial axis of the window: per output position o, the window's first input position
// start(o) and the kernel offsets [lo[o], hi[o]) whose positions lie inside X.
struct Axis {
    int64_t in = 1, out = 1, k = 1, s = 1, d = 1, p = 0;
    std::vector<int64_t> lo, hi;
    int64_t start(int64_t o) const { return o * s - p; }

    void clip() {
        lo.resize(out);
        hi.resize(out);
        for (int64_t o = 0; o < out; ++o) {
            const int64_t st = start(o);
            const int64_t first = st >= 0 ? 0 : (-st + d - 1) / d;   // first offset with st + kk d >= 0
            const int64_t last = st > in - 1 ? -1 : (in - 1 - st) / d;  // last with st + kk d <= in - 1
            lo[o] = std::min(first, k);
            hi[o] = std::max(lo[o], std::min(k, last + 1));
        }
    }
};

// Axes D, H, W of the pool: a 1-D or 2-D pool has unit leading axes.
std::vector<Axis> read_axes(const ExternParams& p) {
    const std::vector<int64_t> in = p.ints("in"), out = p.ints("out"), k = p.ints("kernel"), s = p.ints("strides"),
                               d = p.ints("dilations"), pad = p.ints("pads");
    const size_t sp = in.size();
    KILN_CHECK(sp >= 1 && sp <= 3 && out.size() == sp && k.size() == sp && s.size() == sp && d.size() == sp &&
                   pad.size() == sp,
               kInvalidModel)
        << "kiln_maxpool: in, out, kernel, strides, dilations and pads must name the same 1 to 3 axes";
    std::vector<Axis> axes(3);
    for (size_t i = 0; i < sp; ++i) {
        Axis& a = axes[3 - sp + i];
        a.in = in[i], a.out = out[i], a.k = k[i], a.s = s[i], a.d = d[i], a.p = pad[i];
        KILN_CHECK(a.in >= 1 && a.out >= 1 && a.k >= 1 && a.s >= 1 && a.d >= 1 && a.p >= 0, kInvalidModel)
            << "kiln_maxpool: axis " << i << " has in " << a.in << ", out " << a.out << ", kernel " << a.k
            << ", stride " << a.s << ", dilation " << a.d << ", pad " << a.p;
    }
    for (Axis& a : axes) a.clip();
    return axes;
}

// The float32 scan of windows that lie inside X along W, 2 L outputs at a time (two independent
// chains of compares), L lanes per GCC/Clang vector: 4 (SSE2, every x86-64; wider generic
// vectors lower to scalar code without -mavx) or 8 (AVX2, chosen at run time where the CPU has
// it: the runtime is built for the baseline ISA). Branch-free: a lane keeps its first strict
// maximum, or its first NaN.
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
#define KILN_POOL_INLINE inline __attribute__((always_inline))

// x[0], x[s], ..., x[(L - 1) s]; stride 2 (the usual pool) from two loads and a shuffle, the
// second load ending at x[(L - 1) s].
template <typename V>
KILN_POOL_INLINE V gather(const float* x, int64_t s) {
    constexpr int L = sizeof(V) / sizeof(float);
    V a, b;
    std::memcpy(&a, x, sizeof a);
    if (s == 1) return a;
    if (s == 2) {
        std::memcpy(&b, x + L - 1, sizeof b);
        if constexpr (L == 4) return __builtin_shufflevector(a, b, 0, 2, 5, 7);
        else return __builtin_shufflevector(a, b, 0, 2, 4, 6, 9, 11, 13, 15);
    }
    for (int l = 0; l < L; ++l) a[l] = x[l * s];
    return a;
}

// v (at indices i) replaces the running maximum where greater, or NaN over a number.
template <typename V, typename I>
KILN_POOL_INLINE void keep_max(V v, I i, V& best, I& at) {
    const I take = (v > best) | ((v != v) & (best == best));
    best = reinterpret_cast<V>((take & reinterpret_cast<I>(v)) | (~take & reinterpret_cast<I>(best)));
    at = (take & i) | (~take & at);
}

// Outputs ow .. ow + 2 L - 1 of one row (first window column c0 = ow s - p; window rows at
// plane offsets rows[0 .. nr)): values into y (unless null), plane offsets + base into ind.
struct RowScan {
    const float* x;
    const int64_t* rows;
    int nr;
    int64_t k, d, s, c0;
    float* y;
    int64_t* ind;
    int64_t base;
};

template <typename V, typename I>
KILN_POOL_INLINE void scan_windows(const RowScan& r) {
    constexpr int L = sizeof(V) / sizeof(float);
    I lane;
    for (int l = 0; l < L; ++l) lane[l] = static_cast<int32_t>(l * r.s);
    const I lane2 = lane + static_cast<int32_t>(L * r.s);
    const int64_t half = L * r.s, first = r.rows[0] + r.c0;
    V b0 = gather<V>(r.x + first, r.s), b1 = gather<V>(r.x + first + half, r.s);
    I a0 = lane + static_cast<int32_t>(first), a1 = lane2 + static_cast<int32_t>(first);
    for (int w = 0; w < r.nr; ++w)
        for (int64_t kw = 0; kw < r.k; ++kw) {
            const int64_t off = r.rows[w] + r.c0 + kw * r.d;
            const int32_t o32 = static_cast<int32_t>(off);
            keep_max(gather<V>(r.x + off, r.s), lane + o32, b0, a0);
            keep_max(gather<V>(r.x + off + half, r.s), lane2 + o32, b1, a1);
        }
    if (r.y) {
        std::memcpy(r.y, &b0, sizeof b0);
        std::memcpy(r.y + L, &b1, sizeof b1);
    }
    for (int l = 0; l < L; ++l) r.ind[l] = r.base + a0[l], r.ind[L + l] = r.base + a1[l];
}

void scan_sse(const RowScan& r) { scan_windows<V4, I4>(r); }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) void scan_avx2(const RowScan& r) { scan_windows<V8, I8>(r); }
bool have_avx2() { return __builtin_cpu_supports("avx2"); }
#else
void scan_avx2(const RowScan& r) { scan_windows<V4, I4>(r); }
bool have_avx2() { return false; }
#endif

// x[i] replaces the running maximum best (at index bi) where greater, or NaN over a number;
// branch-free (bitwise selects: a branch per element mispredicted on random data, and small
// windows, e.g. the digits CNN's 2x2 pools, run this path only).
template <typename T>
inline void keep_max(const T* x, int64_t i, T& best, int64_t& bi) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const T v = x[i];
    const bool take = (v > best) | ((v != v) & (best == best));
    const U m = U{0} - static_cast<U>(take);
    U vb, bb;
    std::memcpy(&vb, &v, sizeof v);
    std::memcpy(&bb, &best, sizeof best);
    bb = (vb & m) | (bb & ~m);
    std::memcpy(&best, &bb, sizeof best);
    const int64_t mi = -static_cast<int64_t>(take);
    bi = (i & mi) | (bi & ~mi);
}

template <typename T>
class MaxPool final : public ExternKernel {
public:
    MaxPool(const ExternParams& p, const std::vector<ExternArg>& args)
        : x_(p.integer("x")), y_(p.integer("y")), ind_(p.integer("indices")), planes_(p.integer("planes")),
          axes_(read_axes(p)) {
        in_plane_ = axes_[0].in * axes_[1].in * axes_[2].in;
        step_ = p.integer_or("step", have_avx2() ? 16 : 8);
        KILN_CHECK(step_ == 8 || (step_ == 16 && have_avx2()), kInvalidModel)
            << "kiln_maxpool: step " << step_ << " (8, or 16 where the CPU has AVX2)";
        const Axis& aw = axes_[2];
        while (inner_lo_ < aw.out && aw.hi[inner_lo_] - aw.lo[inner_lo_] != aw.k) ++inner_lo_;
        inner_hi_ = inner_lo_;
        while (inner_hi_ < aw.out && aw.hi[inner_hi_] - aw.lo[inner_hi_] == aw.k) ++inner_hi_;
        out_plane_ = axes_[0].out * axes_[1].out * axes_[2].out;
        const int64_t n = static_cast<int64_t>(args.size());
        const bool y_ok = y_ == -1 || (y_ >= 0 && y_ < n && args[y_].dtype == args[x_].dtype &&
                                       shape_numel(args[y_].shape) == planes_ * out_plane_);
        KILN_CHECK(x_ >= 0 && x_ < n && y_ok && ind_ >= 0 && ind_ < n && planes_ >= 1 &&
                       args[ind_].dtype == DType::kInt64 && shape_numel(args[x_].shape) == planes_ * in_plane_ &&
                       shape_numel(args[ind_].shape) == planes_ * out_plane_,
                   kInvalidModel)
            << "kiln_maxpool: arguments do not match planes " << planes_ << " x " << in_plane_ << " / " << out_plane_;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        Job job{this, static_cast<const T*>(args[x_]), y_ >= 0 ? static_cast<T*>(args[y_]) : nullptr,
                static_cast<int64_t*>(args[ind_])};
        if (env.parallel_for && planes_ > 1 && planes_ * in_plane_ >= (1 << 14)) {
            env.parallel_for(env.pool, planes_, &MaxPool::run_planes, &job);
            if (env.stop && *env.stop) return kernel_stopped_status();
        } else {
            run_planes(0, planes_, &job);
        }
        return Status::ok_status();
    }

private:
    struct Job {
        const MaxPool* self;
        const T* x;
        T* y;
        int64_t* ind;
    };

    static void run_planes(int64_t b, int64_t e, void* ctx) {
        const auto* j = static_cast<const Job*>(ctx);
        const MaxPool& k = *j->self;
        std::vector<int64_t> rows(static_cast<size_t>(k.axes_[0].k * k.axes_[1].k));  // a window's (kd, kh)
        for (int64_t p = b; p < e; ++p)
            k.plane(j->x + p * k.in_plane_, j->y ? j->y + p * k.out_plane_ : nullptr, j->ind + p * k.out_plane_,
                    p * k.in_plane_, rows.data());
    }

    // One (n, c) plane; `base` is the plane's first flat index in X; y null: Indices only.
    void plane(const T* x, T* y, int64_t* ind, int64_t base, int64_t* rows) const {
        const Axis &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
        for (int64_t od = 0; od < ad.out; ++od)
            for (int64_t oh = 0; oh < ah.out; ++oh) {
                // The window's rows inside X (row-major): their offsets in the plane.
                int nr = 0;
                for (int64_t kd = ad.lo[od]; kd < ad.hi[od]; ++kd)
                    for (int64_t kh = ah.lo[oh]; kh < ah.hi[oh]; ++kh)
                        rows[nr++] = ((ad.start(od) + kd * ad.d) * ah.in + ah.start(oh) + kh * ah.d) * aw.in;
                const int64_t o = (od * ah.out + oh) * aw.out;
                out_row(x, rows, nr, y ? y + o : nullptr, ind + o, base);
            }
    }

    // One row of outputs: float32 windows wholly inside X along W step_ (8 or 16) outputs at a
    // time, the others (the borders, rows shorter than a step) one by one.
    void out_row(const T* x, const int64_t* rows, int nr, T* y, int64_t* ind, int64_t base) const {
        const Axis& aw = axes_[2];
        int64_t ow = 0;
        if constexpr (std::is_same_v<T, float>) {
            if (nr > 0 && in_plane_ < (int64_t{1} << 31)) {
                for (; ow < inner_lo_; ++ow) scalar_out(x, rows, nr, ow, y, ind, base);
                for (; ow + step_ <= inner_hi_; ow += step_) vector_out(x, rows, nr, ow, y, ind, base);
                // The rest of the inner outputs as the last step of them (some written twice, alike).
                if (ow < inner_hi_ && inner_hi_ - inner_lo_ >= step_) {
                    vector_out(x, rows, nr, inner_hi_ - step_, y, ind, base);
                    ow = inner_hi_;
                }
            }
        }
        for (; ow < aw.out; ++ow) scalar_out(x, rows, nr, ow, y, ind, base);
    }

    // Output ow: keep the first strict maximum (or the first NaN) in row-major order.
    void scalar_out(const T* x, const int64_t* rows, int nr, int64_t ow, T* y, int64_t* ind, int64_t base) const {
        const Axis& aw = axes_[2];
        const int64_t ws = aw.start(ow), wlo = aw.lo[ow], whi = aw.hi[ow];
        if (nr == 0 || wlo == whi) {  // no element inside X
            if (y) y[ow] = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::lowest();
            ind[ow] = planes_ * in_plane_;
            return;
        }
        int64_t bi = rows[0] + ws + wlo * aw.d;
        T best = x[bi];
        for (int r = 0; r < nr; ++r)
            for (int64_t kw = wlo; kw < whi; ++kw) keep_max(x, rows[r] + ws + kw * aw.d, best, bi);
        if (y) y[ow] = best;
        ind[ow] = base + bi;
    }

    // Outputs ow .. ow + step_ - 1, whose windows lie inside X along W: the same scan, lane-wise.
    void vector_out(const float* x, const int64_t* rows, int nr, int64_t ow, float* y, int64_t* ind,
                    int64_t base) const {
        const Axis& aw = axes_[2];
        const RowScan r{x, rows, nr, aw.k, aw.d, aw.s, aw.start(ow), y ? y + ow : nullptr, ind + ow, base};
        if (step_ == 16) scan_avx2(r);
        else scan_sse(r);
    }

    int64_t x_, y_, ind_, planes_, in_plane_ = 1, out_plane_ = 1;
    std::vector<Axis> axes_;
    int64_t inner_lo_ = 0, inner_hi_ = 0;  // the outputs along W whose windows lie inside X
    int64_t step_ = 8;  // outputs per vector_out: 16 with AVX2
};

}  // namespace

std::unique_ptr<ExternKernel> make_maxpool_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    const int64_t x = p.integer("x");
    KILN_CHECK(x >= 0 && x < static_cast<int64_t>(args.size()), kInvalidModel) << "kiln_maxpool: bad x argument";
    if (args[x].dtype == DType::kFloat32) return std::make_unique<MaxPool<float>>(p, args);
    KILN_CHECK(args[x].dtype == DType::kFloat64, kInvalidModel) << "kiln_maxpool: X must be float32 or float64";
    return std::make_unique<MaxPool<double>>(p, args);
}

}  // namespace kiln::runtime
