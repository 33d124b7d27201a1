#include "runtime/maxpool_kernel.h"

#include <algorithm>
#include <limits>
#include <string>

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

template <typename T>
class MaxPool final : public ExternKernel {
public:
    MaxPool(const ExternParams& p, const std::vector<ExternArg>& args)
        : x_(p.integer("x")), y_(p.integer("y")), ind_(p.integer("indices")), planes_(p.integer("planes")),
          axes_(read_axes(p)) {
        in_plane_ = axes_[0].in * axes_[1].in * axes_[2].in;
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
        for (int64_t p = b; p < e; ++p)
            k.plane(j->x + p * k.in_plane_, j->y ? j->y + p * k.out_plane_ : nullptr, j->ind + p * k.out_plane_,
                    p * k.in_plane_);
    }

    // One (n, c) plane; `base` is the plane's first flat index in X; y null: Indices only.
    void plane(const T* x, T* y, int64_t* ind, int64_t base) const {
        const Axis &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
        const int64_t hw = ah.in * aw.in;
        for (int64_t od = 0; od < ad.out; ++od)
            for (int64_t oh = 0; oh < ah.out; ++oh)
                for (int64_t ow = 0; ow < aw.out; ++ow) {
                    const int64_t o = (od * ah.out + oh) * aw.out + ow;
                    if (ad.lo[od] == ad.hi[od] || ah.lo[oh] == ah.hi[oh] || aw.lo[ow] == aw.hi[ow]) {
                        if (y) y[o] = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                    : std::numeric_limits<T>::lowest();
                        ind[o] = planes_ * in_plane_;
                        continue;
                    }
                    const int64_t ws = aw.start(ow), wlo = aw.lo[ow], whi = aw.hi[ow];
                    // Start from the window's first element inside X, then keep the first strict
                    // maximum (or the first NaN) in row-major order.
                    int64_t bi = (ad.start(od) + ad.lo[od] * ad.d) * hw + (ah.start(oh) + ah.lo[oh] * ah.d) * aw.in +
                                 ws + wlo * aw.d;
                    T best = x[bi];
                    for (int64_t kd = ad.lo[od]; kd < ad.hi[od]; ++kd)
                        for (int64_t kh = ah.lo[oh]; kh < ah.hi[oh]; ++kh) {
                            const int64_t row = (ad.start(od) + kd * ad.d) * hw + (ah.start(oh) + kh * ah.d) * aw.in + ws;
                            for (int64_t kw = wlo; kw < whi; ++kw) {
                                const int64_t i = row + kw * aw.d;
                                const T v = x[i];
                                const bool take = v > best || (v != v && best == best);
                                best = take ? v : best;
                                bi = take ? i : bi;
                            }
                        }
                    if (y) y[o] = best;
                    ind[o] = base + bi;
                }
    }

    int64_t x_, y_, ind_, planes_, in_plane_ = 1, out_plane_ = 1;
    std::vector<Axis> axes_;
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
