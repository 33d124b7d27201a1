#include "runtime/dql_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/executable.h"
#include "runtime/quant_rounding.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using quant::kChunk;
using quant::round_magic;

// The range of x[0, n) joined with 0 (KILN_QUANT_LOOP: quant_rounding.h).
KILN_QUANT_LOOP void dql_range(const float* __restrict x, int64_t n, float* lo, float* hi) {
    float a = 0.f, b = 0.f;
    for (int64_t i = 0; i < n; ++i) {
        a = std::min(a, x[i]);
        b = std::max(b, x[i]);
    }
    *lo = a, *hi = b;
}

// y = saturate(rint(x / scale) + zp) over n elements.
KILN_QUANT_LOOP void dql_quantize(const float* __restrict x, uint8_t* __restrict y, int64_t n, float scale, float zp) {
    // rint half to even for |v| < 2^22 (|x / scale| <= 255 here): adding and removing m.
    const float m = round_magic();
    for (int64_t i = 0; i < n; ++i) {
        const float v = std::min(4e6f, std::max(-4e6f, x[i] / scale));
        y[i] = static_cast<uint8_t>(std::min(255.f, std::max(0.f, ((v + m) - m) + zp)));
    }
}

class DqlKernel final : public ExternKernel {
public:
    DqlKernel(const ExternParams& p, const std::vector<ExternArg>& args) {
        auto arg = [&](const char* key, DType t, const char* type, bool optional) {
            const int64_t i = optional ? p.integer_or(key, -1) : p.integer(key);
            if (optional && i < 0) return i;
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()) && args[i].dtype == t, kInvalidModel)
                << "kiln_dql: argument '" << key << "' is not a " << type << " argument of the step's "
                << args.size();
            return i;
        };
        x_ = arg("x", DType::kFloat32, "float32", false), y_ = arg("y", DType::kUInt8, "uint8", false);
        ys_ = arg("ys", DType::kFloat32, "float32", true), yz_ = arg("yz", DType::kUInt8, "uint8", true);
        n_ = shape_numel(args[x_].shape);
        KILN_CHECK(shape_numel(args[y_].shape) == n_, kInvalidModel) << "kiln_dql: x and y differ in size";
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        const int64_t chunks = std::max<int64_t>(1, (n_ + kChunk - 1) / kChunk);
        std::vector<float> lo(chunks, 0.f), hi(chunks, 0.f);  // 0 included, as ONNX's range
        struct Ctx {
            const DqlKernel* self;
            void* const* args;
            float *lo, *hi;
            float scale, zp;
        } ctx{this, args, lo.data(), hi.data(), 1.f, 0.f};
        env.parallel_for(env.pool, chunks,
                         [](int64_t b, int64_t e, void* c) {
                             auto* x = static_cast<Ctx*>(c);
                             for (int64_t i = b; i < e; ++i) x->self->range(x->args, i, &x->lo[i], &x->hi[i]);
                         },
                         &ctx);
        const float mn = *std::min_element(lo.begin(), lo.end()), mx = *std::max_element(hi.begin(), hi.end());
        ctx.scale = mx == mn ? 1.f : (mx - mn) / 255.f;
        ctx.zp = std::nearbyint(std::min(255.f, std::max(0.f, 0.f - mn / ctx.scale)));
        env.parallel_for(env.pool, chunks,
                         [](int64_t b, int64_t e, void* c) {
                             auto* x = static_cast<Ctx*>(c);
                             for (int64_t i = b; i < e; ++i) x->self->quantize(x->args, i, x->scale, x->zp);
                         },
                         &ctx);
        if (ys_ >= 0) *static_cast<float*>(args[ys_]) = ctx.scale;
        if (yz_ >= 0) *static_cast<uint8_t*>(args[yz_]) = static_cast<uint8_t>(ctx.zp);
        if (env.stop && *env.stop) return kernel_stopped_status();
        return Status::ok_status();
    }

private:
    void range(void* const* args, int64_t chunk, float* lo, float* hi) const {
        const float* x = static_cast<const float*>(args[x_]) + chunk * kChunk;
        dql_range(x, std::min(kChunk, n_ - chunk * kChunk), lo, hi);
    }

    void quantize(void* const* args, int64_t chunk, float scale, float zp) const {
        dql_quantize(static_cast<const float*>(args[x_]) + chunk * kChunk, static_cast<uint8_t*>(args[y_]) + chunk * kChunk,
                     std::min(kChunk, n_ - chunk * kChunk), scale, zp);
    }

    int64_t x_ = -1, y_ = -1, ys_ = -1, yz_ = -1, n_ = 0;
};

}  // namespace

std::unique_ptr<ExternKernel> make_dql_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<DqlKernel>(p, args);
}

}  // namespace kiln::runtime
