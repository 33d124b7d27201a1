#include "runtime/qadd_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "runtime/executable.h"
#include "runtime/quant_rounding.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using quant::kChunk;

struct QAddScales {
    float as, bs, ys, az, bz, yz, lo, hi;
};

// y = quantize(dequantize(a) + dequantize(b)) over n elements; restrict: a, b and y never alias
// (the plan gives the output its own buffer). KILN_QUANT_LOOP (quant_rounding.h): the baseline
// build took 468 us for a 512x28x28 add on one thread, the AVX-512 clone 65 us.
//
// rint, half to even (the FPU's default mode), is nearbyint: in the AVX clones one vrndscaleps
// / vroundps, for any magnitude, so the quotient needs no clamp into the +-2^22 where the
// 1.5 * 2^23 trick (round_magic) rounds; that trick and its clamp took four operations of
// about twenty per vector, and the add 27% longer (an 802816-byte add, 131 -> 96 us). The
// saturation clamps a huge or infinite quotient as the clamp did.
template <typename A, typename B, typename Y>
KILN_QUANT_LOOP void qadd_loop(const A* __restrict a, const B* __restrict b, Y* __restrict y, int64_t n, QAddScales s) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = ((static_cast<float>(a[i]) - s.az) * s.as + (static_cast<float>(b[i]) - s.bz) * s.bs) / s.ys;
        const float q = std::min(s.hi, std::max(s.lo, std::nearbyint(v) + s.yz));
        if constexpr (std::is_same_v<Y, float>) y[i] = (q - s.yz) * s.ys;
        else y[i] = static_cast<Y>(q);
    }
}

class QAddKernel final : public ExternKernel {
public:
    QAddKernel(const ExternParams& p, const std::vector<ExternArg>& args) {
        a_ = p.integer("a"), b_ = p.integer("b"), y_ = p.integer("y");
        f32_out_ = p.str("out") == "f32";
        auto arg = [&](const char* key) -> const ExternArg& {
            const int64_t i = p.integer(key);
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()), kInvalidModel)
                << "kiln_qadd: argument '" << key << "' is not one of the step's " << args.size();
            return args[i];
        };
        const ExternArg &a = arg("a"), &b = arg("b"), &y = arg("y");
        n_ = shape_numel(y.shape);
        KILN_CHECK(shape_numel(a.shape) == n_ && shape_numel(b.shape) == n_ && (a.dtype == DType::kUInt8 || a.dtype == DType::kInt8) &&
                       (b.dtype == DType::kUInt8 || b.dtype == DType::kInt8),
                   kInvalidModel)
            << "kiln_qadd: a, b and y must be 8-bit tensors of one size";
        a_signed_ = a.dtype == DType::kInt8, b_signed_ = b.dtype == DType::kInt8;
        const ExternArg& yz = arg("yz");
        y_signed_ = yz.dtype == DType::kInt8;
        KILN_CHECK(f32_out_ ? y.dtype == DType::kFloat32 : y.dtype == yz.dtype, kInvalidModel) << "kiln_qadd: y's dtype";
        as_ = scalar(arg("as")), bs_ = scalar(arg("bs")), ys_ = scalar(arg("ys"));
        az_ = scalar(arg("az")), bz_ = scalar(arg("bz")), yz_ = scalar(yz);
        if (p.has("ab_layout") && p.str("ab_layout") == "nhwc") {
            nchw_ = p.ints("shape");
            KILN_CHECK(f32_out_ && nchw_.size() == 4 && nchw_[0] * nchw_[1] * nchw_[2] * nchw_[3] == n_, kInvalidModel)
                << "kiln_qadd: ab_layout=nhwc needs out=f32 and the 4-D shape (N,C,H,W) of its " << n_ << " elements";
        }
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        struct Ctx {
            const QAddKernel* self;
            void* const* args;
        } ctx{this, args};
        if (!nchw_.empty()) {  // NHWC a, b -> NCHW float y, by tiles of pixels and channels
            const int64_t tiles = nchw_[0] * ((nchw_[2] * nchw_[3] + kTilePixels - 1) / kTilePixels) *
                                  ((nchw_[1] + kTileChannels - 1) / kTileChannels);
            env.parallel_for(env.pool, tiles,
                             [](int64_t b, int64_t e, void* c) {
                                 auto* x = static_cast<Ctx*>(c);
                                 for (int64_t i = b; i < e; ++i) x->self->transposed_tile(x->args, i);
                             },
                             &ctx);
            if (env.stop && *env.stop) return kernel_stopped_status();
            return Status::ok_status();
        }
        env.parallel_for(env.pool, (n_ + kChunk - 1) / kChunk,
                         [](int64_t b, int64_t e, void* c) {
                             auto* x = static_cast<Ctx*>(c);
                             for (int64_t i = b; i < e; ++i) x->self->chunk(x->args, i * kChunk);
                         },
                         &ctx);
        if (env.stop && *env.stop) return kernel_stopped_status();
        return Status::ok_status();
    }

private:
    static float scalar(const ExternArg& a) {
        KILN_CHECK(a.constant && shape_numel(a.shape) == 1, kInvalidModel) << "kiln_qadd: a scale or zero point is not a one-element constant";
        switch (a.dtype) {
            case DType::kFloat32: return *static_cast<const float*>(a.constant);
            case DType::kUInt8: return *static_cast<const uint8_t*>(a.constant);
            case DType::kInt8: return *static_cast<const int8_t*>(a.constant);
            default: KILN_CHECK(false, kInvalidModel) << "kiln_qadd: a scale or zero point of an unexpected dtype";
        }
        return 0;
    }

    template <typename A, typename B, typename Y>
    void loop(const A* a, const B* b, Y* y, int64_t n) const {
        qadd_loop(a, b, y, n, QAddScales{as_, bs_, ys_, az_, bz_, yz_, y_signed_ ? -128.f : 0.f, y_signed_ ? 127.f : 255.f});
    }

    template <typename A, typename B>
    void with_y(const A* a, const B* b, void* y, int64_t off, int64_t n) const {
        if (f32_out_) loop(a, b, static_cast<float*>(y) + off, n);
        else if (y_signed_) loop(a, b, static_cast<int8_t*>(y) + off, n);
        else loop(a, b, static_cast<uint8_t*>(y) + off, n);
    }

    /// Elements [off, off + n) of a and b into elements [y_off, y_off + n) of y (args[y_], or a
    /// tile's buffer).
    void compute(void* const* args, int64_t off, void* y, int64_t y_off, int64_t n) const {
        const void *a = static_cast<const uint8_t*>(args[a_]) + off, *b = static_cast<const uint8_t*>(args[b_]) + off;
        if (a_signed_ && b_signed_) with_y(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), y, y_off, n);
        else if (a_signed_) with_y(static_cast<const int8_t*>(a), static_cast<const uint8_t*>(b), y, y_off, n);
        else if (b_signed_) with_y(static_cast<const uint8_t*>(a), static_cast<const int8_t*>(b), y, y_off, n);
        else with_y(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), y, y_off, n);
    }

    void chunk(void* const* args, int64_t off) const { compute(args, off, args[y_], off, std::min(kChunk, n_ - off)); }

    /// Pixels [p0, p0 + kTilePixels) and channels [c0, c0 + kTileChannels) of one image of NHWC
    /// a and b: the sums in NHWC order into a buffer (the vector loop, a run of channels per
    /// pixel), then each channel's run of pixels into the NCHW y. (Tiles of pixels alone split
    /// ResNet-50's last add, 7x7 pixels in tiles of 16, as 32 against 17 pixels over two threads.)
    void transposed_tile(void* const* args, int64_t tile) const {
        const int64_t c = nchw_[1], hw = nchw_[2] * nchw_[3];
        const int64_t per_image = (hw + kTilePixels - 1) / kTilePixels, blocks = (c + kTileChannels - 1) / kTileChannels;
        const int64_t cb = tile % blocks, pt = tile / blocks % per_image, n = tile / blocks / per_image;
        const int64_t p0 = pt * kTilePixels, p1 = std::min(hw, p0 + kTilePixels);
        const int64_t c0 = cb * kTileChannels, cw = std::min(c, c0 + kTileChannels) - c0;
        std::vector<float> buf(static_cast<size_t>((p1 - p0) * cw));
        for (int64_t p = p0; p < p1; ++p) compute(args, (n * hw + p) * c + c0, buf.data(), (p - p0) * cw, cw);
        float* y = static_cast<float*>(args[y_]) + n * c * hw;
        for (int64_t ch = 0; ch < cw; ++ch)
            for (int64_t p = p0; p < p1; ++p) y[(c0 + ch) * hw + p] = buf[static_cast<size_t>((p - p0) * cw + ch)];
    }

    static constexpr int64_t kTilePixels = 16, kTileChannels = 256;

    int64_t a_ = -1, b_ = -1, y_ = -1, n_ = 0;
    bool f32_out_ = false, a_signed_ = false, b_signed_ = false, y_signed_ = false;
    float as_ = 1, bs_ = 1, ys_ = 1, az_ = 0, bz_ = 0, yz_ = 0;
    std::vector<int64_t> nchw_;  // ab_layout=nhwc: y's N,C,H,W (a and b NHWC); empty: one layout
};

}  // namespace

std::unique_ptr<ExternKernel> make_qadd_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<QAddKernel>(p, args);
}

}  // namespace kiln::runtime
