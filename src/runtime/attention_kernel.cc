// kiln_attention (attention_kernel.h): blocks of query rows through sgemm, softmax, sgemm.
#include "runtime/attention_kernel.h"

#if KILN_HAVE_DNNL
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "runtime/executable.h"
#include "runtime/extern_parts.h"
#include "runtime/softmax_kernel.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kRows = 32;  // query rows per part: 32 x T scores in L2, a sgemm M that fills its tiles

class BlockedAttention final : public ExternKernel {
public:
    BlockedAttention(const ExternParams& p, const std::vector<ExternArg>& args)
        : q_(p.integer("q")), kt_(p.integer("kt")), v_(p.integer("v")), y_(p.integer("y")), bh_(p.integer("bh")),
          s_(p.integer("s")), t_(p.integer("t")), d_(p.integer("d")), dv_(p.integer("dv")),
          scale_(static_cast<float>(std::stod(p.str("scale")))) {
        KILN_CHECK(bh_ >= 1 && s_ >= 1 && t_ >= 1 && d_ >= 1 && dv_ >= 1, kInvalidModel)
            << "kiln_attention: sizes must be positive";
        const std::pair<int64_t, int64_t> want[] = {{q_, bh_ * s_ * d_}, {kt_, bh_ * d_ * t_}, {v_, bh_ * t_ * dv_},
                                                    {y_, bh_ * s_ * dv_}};
        for (const auto& [arg, numel] : want) {
            KILN_CHECK(arg >= 0 && arg < static_cast<int64_t>(args.size()), kInvalidModel)
                << "kiln_attention: argument " << arg << " out of range";
            const ExternArg& a = args[static_cast<size_t>(arg)];
            KILN_CHECK(a.dtype == DType::kFloat32 && shape_numel(a.shape) == numel, kInvalidModel)
                << "kiln_attention: argument " << arg << " " << shape_str(a.shape) << " must be float32 of " << numel
                << " elements";
        }
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        const auto* q = static_cast<const float*>(args[q_]);
        const auto* kt = static_cast<const float*>(args[kt_]);
        const auto* v = static_cast<const float*>(args[v_]);
        auto* y = static_cast<float*>(args[y_]);
        const int64_t blocks = (s_ + kRows - 1) / kRows;
        Status st = run_extern_parts(env, bh_ * blocks, [&](int64_t part) {
            const int64_t h = part / blocks, r0 = part % blocks * kRows, rows = std::min(kRows, s_ - r0);
            thread_local std::vector<float> scores;
            scores.resize(static_cast<size_t>(kRows * t_));
            omp_set_num_threads(1);  // this part is one of Kiln's threads
            dnnl_status_t r = dnnl_sgemm('N', 'N', rows, t_, d_, scale_, q + (h * s_ + r0) * d_, d_, kt + h * d_ * t_, t_,
                                         0.0f, scores.data(), t_);
            if (r != dnnl_success) return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
            softmax_rows(scores.data(), scores.data(), rows, t_);
            r = dnnl_sgemm('N', 'N', rows, dv_, t_, 1.0f, scores.data(), t_, v + h * t_ * dv_, dv_, 0.0f,
                           y + (h * s_ + r0) * dv_, dv_);
            if (r != dnnl_success) return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
            return Status::ok_status();
        });
        if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
        return st;
    }

private:
    int64_t q_, kt_, v_, y_, bh_, s_, t_, d_, dv_;
    float scale_;
};

}  // namespace

std::unique_ptr<ExternKernel> make_attention_kernel(const ExternParams& params, const std::vector<ExternArg>& args) {
    return std::make_unique<BlockedAttention>(params, args);
}

}  // namespace kiln::runtime
#endif
