#include "runtime/maxpool_grad_kernel.h"

#include <atomic>
#include <cstring>
#include <string>

#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

template <typename T>
class MaxPoolGrad final : public ExternKernel {
public:
    MaxPoolGrad(const ExternParams& p, const std::vector<ExternArg>& args)
        : dy_(p.integer("dy")), ind_(p.integer("indices")), out_(p.integer("out")), planes_(p.integer("planes")),
          in_plane_(p.integer("in_plane")), out_plane_(p.integer("out_plane")) {
        const int64_t n = static_cast<int64_t>(args.size());
        KILN_CHECK(dy_ >= 0 && dy_ < n && ind_ >= 0 && ind_ < n && out_ >= 0 && out_ < n && planes_ >= 0 &&
                       in_plane_ >= 1 && out_plane_ >= 0 && args[ind_].dtype == DType::kInt64 &&
                       shape_numel(args[dy_].shape) == planes_ * out_plane_ &&
                       shape_numel(args[ind_].shape) == planes_ * out_plane_ &&
                       shape_numel(args[out_].shape) == planes_ * in_plane_,
                   kInvalidModel)
            << "kiln_maxpool_grad: arguments do not match planes " << planes_ << " x " << in_plane_ << " / " << out_plane_;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        Job job{this, static_cast<const T*>(args[dy_]), static_cast<const int64_t*>(args[ind_]), static_cast<T*>(args[out_]), -1};
        if (env.parallel_for && planes_ > 1 && planes_ * in_plane_ >= (1 << 14)) {
            env.parallel_for(env.pool, planes_, &MaxPoolGrad::run_planes, &job);
            if (env.stop && *env.stop) return kernel_stopped_status();
        } else {
            run_planes(0, planes_, &job);
        }
        const int64_t bad = job.bad.load();
        if (bad >= 0)
            return Status(ErrorKind::kInvalidArgument, "KilnMaxPoolGrad: index " + std::to_string(job.ind[bad]) +
                                                           " of output element " + std::to_string(bad) +
                                                           " is outside its (n, c) plane");
        return Status::ok_status();
    }

private:
    struct Job {
        const MaxPoolGrad* self;
        const T* dy;
        const int64_t* ind;
        T* dx;
        std::atomic<int64_t> bad;
    };

    static void run_planes(int64_t b, int64_t e, void* ctx) {
        auto* j = static_cast<Job*>(ctx);
        const int64_t ip = j->self->in_plane_, op = j->self->out_plane_;
        for (int64_t p = b; p < e; ++p) {
            T* dx = j->dx + p * ip;
            std::memset(dx, 0, static_cast<size_t>(ip) * sizeof(T));
            const int64_t base = p * ip;
            for (int64_t o = p * op; o < (p + 1) * op; ++o) {
                const int64_t i = j->ind[o] - base;
                if (i < 0 || i >= ip) {
                    j->bad.store(o);
                    continue;
                }
                dx[i] += j->dy[o];
            }
        }
    }

    int64_t dy_, ind_, out_, planes_, in_plane_, out_plane_;
};

}  // namespace

std::unique_ptr<ExternKernel> make_maxpool_grad_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    const int64_t dy = p.integer("dy");
    KILN_CHECK(dy >= 0 && dy < static_cast<int64_t>(args.size()), kInvalidModel) << "kiln_maxpool_grad: bad dy argument";
    if (args[dy].dtype == DType::kFloat32) return std::make_unique<MaxPoolGrad<float>>(p, args);
    KILN_CHECK(args[dy].dtype == DType::kFloat64, kInvalidModel) << "kiln_maxpool_grad: dY must be float32 or float64";
    return std::make_unique<MaxPoolGrad<double>>(p, args);
}

}  // namespace kiln::runtime
