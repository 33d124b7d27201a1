#include "runtime/qmaxpool_kernel.h"

#include <algorithm>
#include <cstdint>

#include "runtime/executable.h"
#include "runtime/quant_rounding.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

/// The most window rows (the NHWC path keeps a pointer per row on the stack).
constexpr int64_t kMaxKernelRows = 64;

/// The taps of one output index along one dim: [k0, k1) with input index o*s - p + k*d inside [0, in).
struct Taps {
    int64_t k0 = 0, k1 = 0;
};

Taps taps(int64_t o, int64_t s, int64_t p, int64_t d, int64_t k, int64_t in) {
    const int64_t start = o * s - p;
    Taps t;
    t.k0 = start >= 0 ? 0 : (-start + d - 1) / d;
    t.k1 = std::min<int64_t>(k, start + (in - 1) >= 0 ? (in - 1 - start) / d + 1 : 0);
    t.k1 = std::max(t.k1, t.k0);
    return t;
}

/// One output row of NHWC x and y: per output pixel, its taps' channel runs maxed byte by byte
/// (vpmaxub / vpmaxsb in the AVX clones; one clone call per row, the loops inside it).
template <typename T>
KILN_QUANT_LOOP void nhwc_row(T* __restrict y, int64_t c, int64_t w, int64_t ow_n, int64_t s,
                              int64_t d, int64_t kw_n, int64_t pad, const T* const* rows, int64_t nrows) {
    for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t iw0 = ow * s - pad;
        const int64_t k0 = iw0 >= 0 ? 0 : (-iw0 + d - 1) / d;
        const int64_t k1 = std::min(kw_n, w - 1 - iw0 >= 0 ? (w - 1 - iw0) / d + 1 : 0);
        T* __restrict out = y + ow * c;
        const T* first = rows[0] + (iw0 + k0 * d) * c;
        for (int64_t i = 0; i < c; ++i) out[i] = first[i];
        for (int64_t r = 0; r < nrows; ++r)
            for (int64_t k = k0; k < k1; ++k) {
                const T* __restrict in = rows[r] + (iw0 + k * d) * c;
                for (int64_t i = 0; i < c; ++i) out[i] = std::max(out[i], in[i]);
            }
    }
}

/// One output row of one plane of NCHW-strided data: y[ow * ys] over the taps, the window's
/// columns outermost so that a stride-1 row is one vector max per tap.
template <typename T>
KILN_QUANT_LOOP void max_row(T* __restrict y, int64_t ys, const T* __restrict x, int64_t xs, int64_t ow_n, int64_t s,
                             int64_t d, int64_t kw_n, int64_t pad, int64_t w) {
    for (int64_t kw = 0; kw < kw_n; ++kw) {
        // Outputs whose tap kw is inside the row: o*s - pad + kw*d in [0, w).
        const int64_t off = kw * d - pad;
        const int64_t o0 = off >= 0 ? 0 : (-off + s - 1) / s;
        const int64_t o1 = std::min(ow_n, w - 1 - off >= 0 ? (w - 1 - off) / s + 1 : 0);
        for (int64_t o = o0; o < o1; ++o) y[o * ys] = std::max(y[o * ys], x[(o * s + off) * xs]);
    }
}

class QMaxPoolKernel final : public ExternKernel {
public:
    QMaxPoolKernel(const ExternParams& p, const std::vector<ExternArg>& args) {
        src_ = p.ints("src"), out_ = p.ints("out"), k_ = p.ints("kernel"), s_ = p.ints("strides");
        d_ = p.ints("dilations"), pad_ = p.ints("pads");
        x_ = p.integer("x"), y_ = p.integer("y");
        signed_ = p.str("type") == "s8";
        x_nhwc_ = p.has("x_layout") && p.str("x_layout") == "nhwc";
        y_nhwc_ = p.has("y_layout") && p.str("y_layout") == "nhwc";
        KILN_CHECK(src_.size() == 4 && out_.size() == 2 && k_.size() == 2 && s_.size() == 2 && d_.size() == 2 &&
                       pad_.size() == 2,
                   kInvalidModel)
            << "kiln_qmaxpool: src (4 dims), out, kernel, strides, dilations and pads (2 each) expected";
        const int64_t n = static_cast<int64_t>(args.size());
        KILN_CHECK(x_ >= 0 && x_ < n && y_ >= 0 && y_ < n, kInvalidModel) << "kiln_qmaxpool: x or y is not one of the step's arguments";
        const DType t = signed_ ? DType::kInt8 : DType::kUInt8;
        KILN_CHECK(args[x_].dtype == t && args[y_].dtype == t &&
                       shape_numel(args[x_].shape) == src_[0] * src_[1] * src_[2] * src_[3] &&
                       shape_numel(args[y_].shape) == src_[0] * src_[1] * out_[0] * out_[1],
                   kInvalidModel)
            << "kiln_qmaxpool: x and y must be " << (signed_ ? "s8" : "u8") << " tensors of " << src_[0] << "x" << src_[1]
            << "x" << src_[2] << "x" << src_[3] << " and " << src_[0] << "x" << src_[1] << "x" << out_[0] << "x" << out_[1];
        for (int i = 0; i < 2; ++i)
            for (int64_t o : {int64_t{0}, out_[i] - 1}) {
                const Taps t = taps(o, s_[i], pad_[i], d_[i], k_[i], src_[2 + i]);
                KILN_CHECK(k_[i] >= 1 && s_[i] >= 1 && d_[i] >= 1 && t.k1 > t.k0, kInvalidModel)
                    << "kiln_qmaxpool: a window with no tap inside the input";
        KILN_CHECK(k_[0] <= kMaxKernelRows, kInvalidModel)
            << "kiln_qmaxpool: a window of " << k_[0] << " rows (at most " << kMaxKernelRows << ")";
            }
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        struct Ctx {
            const QMaxPoolKernel* self;
            void* const* args;
        } ctx{this, args};
        env.parallel_for(env.pool, src_[0] * out_[0],
                         [](int64_t b, int64_t e, void* c) {
                             auto* x = static_cast<Ctx*>(c);
                             for (int64_t r = b; r < e; ++r) x->self->output_row(x->args, r);
                         },
                         &ctx);
        if (env.stop && *env.stop) return kernel_stopped_status();
        return Status::ok_status();
    }

private:
    void output_row(void* const* args, int64_t row) const {
        if (signed_) output_row_as(static_cast<const int8_t*>(args[x_]), static_cast<int8_t*>(args[y_]), row);
        else output_row_as(static_cast<const uint8_t*>(args[x_]), static_cast<uint8_t*>(args[y_]), row);
    }

    /// Output row `row` (image row / OH, output row % OH) of every channel.
    template <typename T>
    void output_row_as(const T* x, T* y, int64_t row) const {
        const int64_t n = row / out_[0], oh = row % out_[0], c = src_[1], h = src_[2], w = src_[3], ow_n = out_[1];
        const Taps th = taps(oh, s_[0], pad_[0], d_[0], k_[0], h);
        const int64_t ih0 = oh * s_[0] - pad_[0];
        if (x_nhwc_ && y_nhwc_) {  // a pixel's channels contiguous: one vector max per tap
            const T* rows[kMaxKernelRows];
            int64_t nrows = 0;
            for (int64_t kh = th.k0; kh < th.k1; ++kh) rows[nrows++] = x + (n * h + ih0 + kh * d_[0]) * w * c;
            nhwc_row(y + (n * out_[0] + oh) * ow_n * c, c, w, ow_n, s_[1], d_[1], k_[1], pad_[1], rows, nrows);
            return;
        }
        // Plane by plane, with each layout's strides (NCHW both: stride-1 rows).
        const int64_t xw = x_nhwc_ ? c : 1, yw = y_nhwc_ ? c : 1;
        for (int64_t ch = 0; ch < c; ++ch) {
            T* out = y_nhwc_ ? y + (n * out_[0] + oh) * ow_n * c + ch : y + ((n * c + ch) * out_[0] + oh) * ow_n;
            for (int64_t ow = 0; ow < ow_n; ++ow) out[ow * yw] = signed_ ? static_cast<T>(-128) : static_cast<T>(0);
            for (int64_t kh = th.k0; kh < th.k1; ++kh) {
                const int64_t ih = ih0 + kh * d_[0];
                const T* in = x_nhwc_ ? x + (n * h + ih) * w * c + ch : x + ((n * c + ch) * h + ih) * w;
                max_row(out, yw, in, xw, ow_n, s_[1], d_[1], k_[1], pad_[1], w);
            }
        }
    }

    std::vector<int64_t> src_, out_, k_, s_, d_, pad_;
    int64_t x_ = -1, y_ = -1;
    bool signed_ = false, x_nhwc_ = false, y_nhwc_ = false;
};

}  // namespace

std::unique_ptr<ExternKernel> make_qmaxpool_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<QMaxPoolKernel>(p, args);
}

}  // namespace kiln::runtime
