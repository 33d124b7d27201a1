// A ConvTranspose whose kernel equals its stride (no padding, no dilation, one group): every
// input pixel writes its own kernel-sized tile of the output, so the deconvolution is a matrix
// product and a pixel shuffle:
//   Y[h w, (m, i, j)] = sum_c X[c, h w] W[c, m, i, j]      (oneDNN's matmul on the NCHW input)
//   out[m, h kh + i, w kw + j] = Y[h w, (m, i, j)] + b[m]   (a loop writing output rows in order)
// oneDNN's deconvolution runs it on channels-last only (runtime/dnnl_kernels.cc): a reorder of
// the whole input there and back, and an output of one channel padded to a 16-channel block
// (PP-OCR det's 24 -> 1 2x2/2 at 320x320: 2.7 ms reordering the input, 3.1 ms deconvolving).
#if KILN_HAVE_DNNL

#include "runtime/dnnl_deconv_shuffle.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using memory = dnnl::memory;

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
}

class DnnlDeconvShuffle final : public ExternKernel {
public:
    DnnlDeconvShuffle(const ExternParams& p, const std::vector<ExternArg>& args) {
        x_ = p.integer("x");
        y_ = p.integer("y");
        b_ = p.integer_or("b", -1);
        const std::vector<int64_t> src = p.ints("src"), dst = p.ints("dst"), k = p.ints("kernel");
        KILN_CHECK(src.size() == 4 && dst.size() == 4 && k.size() == 2, kInvalidModel)
            << "dnnl deconv shuffle: 2-D only";
        n_ = src[0], c_ = src[1], h_ = src[2], w_ = src[3], m_ = dst[1], kh_ = k[0], kw_ = k[1];
        KILN_CHECK(dst[0] == n_ && dst[2] == h_ * kh_ && dst[3] == w_ * kw_, kInvalidModel)
            << "dnnl deconv shuffle: output " << dst[2] << "x" << dst[3] << " is not the input times the kernel";
        const int64_t w = p.integer("w");
        KILN_CHECK(w >= 0 && w < static_cast<int64_t>(args.size()) && args[w].constant, kInvalidModel)
            << "dnnl deconv shuffle: the weights must be a constant";
        auto numel = [&](int64_t arg) {
            KILN_CHECK(arg >= 0 && arg < static_cast<int64_t>(args.size()) && args[arg].dtype == DType::kFloat32,
                       kInvalidModel)
                << "dnnl deconv shuffle: argument " << arg << " is not a float32 buffer";
            return shape_numel(args[arg].shape);
        };
        KILN_CHECK(numel(x_) == n_ * c_ * h_ * w_ && numel(y_) == n_ * m_ * h_ * kh_ * w_ * kw_ &&
                       numel(w) == c_ * m_ * kh_ * kw_ && (b_ < 0 || numel(b_) == m_),
                   kInvalidModel)
            << "dnnl deconv shuffle: buffer sizes do not match the parameters";
        // ONNX's [C, M, KH, KW] is the product's right operand [C, (M, KH, KW)] as it is.
        const float* wc = static_cast<const float*>(args[w].constant);
        wt_.assign(wc, wc + c_ * m_ * kh_ * kw_);
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            const Plan& plan = plan_for(std::max(1, threads));
            struct Ctx {
                const DnnlDeconvShuffle* self;
                const Plan* plan;
                void* const* args;
                int64_t image;
            } ctx{this, &plan, args, 0};
            for (ctx.image = 0; ctx.image < n_; ++ctx.image) {
                auto part = [](int64_t b, int64_t e, void* p) {
                    auto* x = static_cast<Ctx*>(p);
                    for (int64_t i = b; i < e; ++i) x->self->run_part(x->plan->parts[i], x->args, x->image);
                };
                if (plan.parts.size() == 1) part(0, 1, &ctx);
                else env.parallel_for(env.pool, static_cast<int64_t>(plan.parts.size()), part, &ctx);
            }
            return Status::ok_status();
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

private:
    /// A band of input rows [h0, h1) of one image: its product and its shuffle.
    struct Part {
        int64_t h0 = 0, h1 = 0;
        dnnl::matmul prim;
        memory::desc x, w, y;  // Y [cols, (M, KH, KW)] = X^T [cols, C] x W [C, (M, KH, KW)]
        memory::desc scratch_md;
        size_t scratch = 0;
    };
    struct Plan {
        std::vector<Part> parts;
    };

    const Plan& plan_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it != plans_.end()) return it->second;
        omp_set_num_threads(1);
        Plan plan;
        const int64_t parts = std::min<int64_t>(threads, h_), taps = m_ * kh_ * kw_;
        for (int64_t i = 0; i < parts; ++i) {
            Part p;
            p.h0 = h_ * i / parts, p.h1 = h_ * (i + 1) / parts;
            const int64_t cols = (p.h1 - p.h0) * w_;
            // X^T is a transposed view of the input's [C, H W] (a band of its columns); the
            // product the other way round (96 x 24 x 12800) ran at 9 GFLOP/s in oneDNN's gemm.
            p.x = memory::desc({cols, c_}, memory::data_type::f32, memory::dims{1, h_ * w_});
            p.w = memory::desc({c_, taps}, memory::data_type::f32, memory::format_tag::ab);
            p.y = memory::desc({cols, taps}, memory::data_type::f32, memory::format_tag::ab);
            dnnl::primitive_attr attr;
            attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
            dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.x, p.w, p.y), attr, cpu_engine());
            p.scratch_md = pd.scratchpad_desc();
            p.scratch = p.scratch_md.get_size();
            p.prim = dnnl::matmul(pd);
            plan.parts.push_back(std::move(p));
        }
        return plans_.emplace(threads, std::move(plan)).first->second;
    }

    void run_part(const Part& p, void* const* args, int64_t image) const {
        const int64_t cols = (p.h1 - p.h0) * w_, taps = m_ * kh_ * kw_;
        thread_local std::vector<float> y;  // the product, reused call to call on a pool thread
        thread_local std::vector<uint8_t> scratch;
        y.resize(static_cast<size_t>(taps * cols));
        scratch.resize(std::max<size_t>(p.scratch, 1));
        omp_set_num_threads(1);
        const float* x = static_cast<const float*>(args[x_]) + (image * c_ * h_ + p.h0) * w_;
        dnnl::stream s(cpu_engine());
        memory xm(p.x, cpu_engine(), const_cast<float*>(x));
        memory wm(p.w, cpu_engine(), const_cast<float*>(wt_.data()));
        memory ym(p.y, cpu_engine(), y.data());
        std::unordered_map<int, memory> margs{{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}};
        if (p.scratch) margs[DNNL_ARG_SCRATCHPAD] = memory(p.scratch_md, cpu_engine(), scratch.data());
        p.prim.execute(s, margs);
        s.wait();
        // The shuffle: output row (m, h kh + i) takes, per input column q, the kw consecutive
        // products Y[(h, q), (m, i, 0..kw)].
        const float* bias = b_ >= 0 ? static_cast<const float*>(args[b_]) : nullptr;
        float* out = static_cast<float*>(args[y_]) + image * m_ * h_ * kh_ * w_ * kw_;
        const int64_t ow = w_ * kw_;
        for (int64_t m = 0; m < m_; ++m) {
            const float b = bias ? bias[m] : 0.f;
            for (int64_t h = p.h0; h < p.h1; ++h)
                for (int64_t i = 0; i < kh_; ++i) {
                    float* row = out + (m * h_ * kh_ + h * kh_ + i) * ow;
                    const float* src = y.data() + (h - p.h0) * w_ * taps + (m * kh_ + i) * kw_;
                    for (int64_t q = 0; q < w_; ++q)
                        for (int64_t j = 0; j < kw_; ++j) row[q * kw_ + j] = src[q * taps + j] + b;
                }
        }
    }

    int64_t x_ = -1, y_ = -1, b_ = -1;
    int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, m_ = 0, kh_ = 0, kw_ = 0;
    std::vector<float> wt_;
    std::mutex mu_;
    std::map<int, Plan> plans_;
};

}  // namespace

bool dnnl_deconv_is_shuffle(const ExternParams& p, const std::vector<ExternArg>& args) {
    if (!p.has("kind") || p.str("kind") != "deconv" || p.integer_or("groups", 1) != 1) return false;
    const std::vector<int64_t> src = p.ints("src"), k = p.ints("kernel");
    // Taps left out of the window are no shuffle; a symbolic step's parameters name all of them
    // (runtime/extern_shape_params.cc).
    if (p.has("taps") && p.ints("taps") != k) return false;
    if (p.has("taps_begin") && !all_equal(p.ints("taps_begin"), 0)) return false;
    const int64_t w = p.integer("w");
    return src.size() == 4 && k.size() == 2 && p.ints("strides") == k && all_equal(p.ints("dilations"), 1) &&
           all_equal(p.ints("pads_begin"), 0) && all_equal(p.ints("pads_end"), 0) && !p.has("post") &&
           w >= 0 && w < static_cast<int64_t>(args.size()) && args[w].constant;
}

std::unique_ptr<ExternKernel> make_dnnl_deconv_shuffle(const ExternParams& p, const std::vector<ExternArg>& args) {
    return std::make_unique<DnnlDeconvShuffle>(p, args);
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
