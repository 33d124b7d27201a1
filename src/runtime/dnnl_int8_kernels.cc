// oneDNN int8 convolution and matmul: ONNX QLinearConv / QLinearMatMul (the matmul: DnnlQMatMul below) (what pass/fuse_qdq.h makes of a QDQ Conv) as
// u8/s8 x s8 -> s32 with the requantisation fused:
//   y = saturate(rint(m[c] * (acc + B_q[c])) + y_zp),  m[c] = x_s * W_s[c] / y_s  (f32, as ONNX)
// oneDNN's output scales are m, its src / dst zero points x_zp / y_zp (padding contributes
// zero to acc, as ONNX's padding by x_zp does), B_q is its s32 bias. W's zero points must be 0
// (oneDNN has none for weights); the matcher leaves other cases to the generated kernel.
//
// oneDNN's int8 jit kernels read and write NHWC. Where x is Kiln's plain NCHW a call reorders it
// to NHWC in row bands across the intra-op pool; an x the compiler kept NHWC between int8
// kernels (x_layout=nhwc, compiler/int8_layout.h) is read as it is. One primitive runs per part
// (whole images, or for one image bands of output rows or blocks of 16 output channels); a part writes whole NHWC
// images (or bands of rows of one image) straight into an NHWC y (y_layout=nhwc), else NHWC into
// its own buffer reordered into its slice of y. oneDNN itself runs single-threaded, as in
// runtime/dnnl_kernels.cc. Constant weights are reordered once, when a thread count's parts
// are made. A residual add fused into the conv (topi::match_qconv_add) runs as post-ops after
// the output scales: round and clip (the conv's own QuantizeLinear), linear, sum onto the
// residual, which a part copies into its dst first unless y already holds it (in place).
// Not oneDNN: a depthwise conv between int8 kernels on a VNNI host (runtime/int8_dwconv.h), a
// 3-channel NCHW input's reorder (runtime/u8_nchw_to_nhwc.h), the batch-1 classifier GEMV
// (runtime/int8_gemv.h), and a channel block's copies into and out of an NHWC y (memcpy per pixel).
#if KILN_HAVE_DNNL
#include "runtime/extern_parts.h"
#include "runtime/dnnl_int8_kernels.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"
#include "runtime/executable.h"
#include "runtime/int8_dwconv.h"
#include "runtime/int8_gemv.h"
#include "runtime/u8_nchw_to_nhwc.h"
#include "support/huge_pages.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

bool is_q8(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

/// oneDNN's type of an 8-bit Kiln dtype (callers check is_q8 first).
dt dnnl_type(DType t) { return t == DType::kUInt8 ? dt::u8 : dt::s8; }

/// Byte buffers of one size lent to one call at a time (concurrent runs of a session).
class BytePool {
public:
    explicit BytePool(size_t bytes) : bytes_(bytes) {}
    std::shared_ptr<uint8_t> take() {
        std::lock_guard<std::mutex> lock(mu_);
        if (!free_.empty()) {
            auto b = free_.back();
            free_.pop_back();
            return b;
        }
        return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(::operator new(bytes_, std::align_val_t{64})),
                                        [](uint8_t* p) { ::operator delete(p, std::align_val_t{64}); });
    }
    void give(std::shared_ptr<uint8_t> b) {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(std::move(b));
    }

private:
    size_t bytes_;
    std::mutex mu_;
    std::vector<std::shared_ptr<uint8_t>> free_;
};

/// A buffer of a pool for the current call.
struct Lease {
    BytePool* pool;
    std::shared_ptr<uint8_t> buf;
    explicit Lease(BytePool* p) : pool(p), buf(p ? p->take() : nullptr) {}
    ~Lease() {
        if (pool) pool->give(std::move(buf));
    }
    uint8_t* get() const { return buf.get(); }
};

struct QPart {
    dnnl::primitive prim;
    memory weights;                 // reordered constant weights
    std::vector<int32_t> bias;      // this part's B_q slice (empty: none)
    memory::desc bias_md, dst_nhwc, dst_kiln, src_nhwc, scratch_md;
    int64_t src_off = 0, dst_off = 0;  // bytes into the NHWC x and Kiln's y
    dnnl::reorder dst_reorder, sum_reorder;  // sum_reorder: the residual's slice into dst_tmp
    memory::desc sum_kiln, sum_nhwc;
    std::unique_ptr<BytePool> dst_tmp, scratch;
    // A block of channels of an NHWC y: its pixels and channels, copied pixel by pixel between
    // y's strided slice and dst_tmp (oneDNN's reorder of a 7x7x1024 slice took ~15 us).
    int64_t slice_pixels = 0, slice_channels = 0;
};

/// `pixels` runs of `bytes` from src (a run every src_stride bytes) to dst (every dst_stride).
void copy_runs(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t pixels, int64_t bytes) {
    for (int64_t i = 0; i < pixels; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, static_cast<size_t>(bytes));
}

/// Parameters (all argument indices into the step's arguments, inputs then outputs):
///   x, xs, xz, w, ws, wz, ys, yz, y; b (optional: int32 bias)
///   src=N,C,H,W  dst=N,M,OH,OW  kernel=KH,KW  groups  strides  dilations (ONNX: 1 = dense)
///   pads_begin  pads_end  x_zp, y_zp (the zero points' values)  per_channel=0|1
///   x_type, y_type: u8 | s8;  x_layout, y_layout: nhwc (default: Kiln's NCHW)
/// A fused residual add (topi::match_qconv_add): sum, sum_s, qs (arguments), c_zp, c_type,
/// sum_zp, sum_type; ys is then the conv's own scale and y_zp / y_type the sum's. The
/// residual, in y's layout, is copied into each part's dst before oneDNN's sum post-op reads it.
class DnnlQConv final : public ExternKernel {
public:
    DnnlQConv(const ExternParams& p, const std::vector<ExternArg>* args) {
        src_ = p.ints("src"), dst_ = p.ints("dst"), kernel_ = p.ints("kernel");
        strides_ = p.ints("strides"), dil_ = p.ints("dilations");
        pb_ = p.ints("pads_begin"), pe_ = p.ints("pads_end");
        groups_ = p.integer_or("groups", 1);
        x_zp_ = static_cast<int32_t>(p.integer("x_zp"));
        y_zp_ = static_cast<int32_t>(p.integer("y_zp"));
        per_channel_ = p.integer_or("per_channel", 0) != 0;
        has_bias_ = p.has("b");
        x_arg_ = p.integer("x"), y_arg_ = p.integer("y");
        x_nhwc_ = p.has("x_layout") && p.str("x_layout") == "nhwc";
        y_nhwc_ = p.has("y_layout") && p.str("y_layout") == "nhwc";
        KILN_CHECK(src_.size() == 4 && dst_.size() == 4 && kernel_.size() == 2 && strides_.size() == 2 &&
                       dil_.size() == 2 && pb_.size() == 2 && pe_.size() == 2 && groups_ >= 1 &&
                       src_[1] % groups_ == 0 && dst_[1] % groups_ == 0,
                   kInvalidModel)
            << "dnnl_qconv: a 2-D convolution's parameters expected";
        src_dt_ = p.str("x_type") == "s8" ? dt::s8 : dt::u8;
        dst_dt_ = p.str("y_type") == "s8" ? dt::s8 : dt::u8;
        if (p.has("sum")) {
            sum_arg_ = p.integer("sum");
            c_zp_ = static_cast<int32_t>(p.integer("c_zp"));
            sum_zp_ = static_cast<int32_t>(p.integer("sum_zp"));
            c_signed_ = p.str("c_type") == "s8";
            sum_dt_ = p.str("sum_type") == "s8" ? dt::s8 : dt::u8;
        }
        scales_.assign(per_channel_ ? dst_[1] : 1, 1.f);  // placeholders for implementation()
        if (args) read_arguments(p, *args);
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            if (dw_) return run_depthwise(args, env);
            std::vector<QPart>& parts = parts_for(std::max(1, threads));
            Lease src(x_nhwc_ ? nullptr : src_pool_.get());
            if (!x_nhwc_) reorder_src(static_cast<const uint8_t*>(args[x_arg_]), src.get(), env, threads);
            uint8_t* src_nhwc = x_nhwc_ ? static_cast<uint8_t*>(args[x_arg_]) : src.get();
            uint8_t* dst = static_cast<uint8_t*>(args[y_arg_]);
            const uint8_t* sum = sum_arg_ >= 0 ? static_cast<const uint8_t*>(args[sum_arg_]) : nullptr;
            Status st = run_extern_parts(env, static_cast<int64_t>(parts.size()),
                                         [&](int64_t i) { return run_part(parts[i], src_nhwc, dst, sum); });
            if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return st;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    /// oneDNN's implementation for the whole step on one thread.
    std::string implementation() {
        return make_pd(src_[0], 0, dst_[1]).impl_info_str();
    }

private:
    /// Reads the constants: weights, scales, zero points, bias (REVIEW.md 8: checked sizes).
    void read_arguments(const ExternParams& p, const std::vector<ExternArg>& args) {
        auto arg = [&](const char* key, bool constant) -> const ExternArg& {
            const int64_t i = p.integer(key);
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()) && (!constant || args[i].constant), kInvalidModel)
                << "dnnl_qconv: argument '" << key << "' is not " << (constant ? "a constant " : "") << "of the step";
            return args[i];
        };
        const ExternArg &x = arg("x", false), &y = arg("y", false), &w = arg("w", true);
        const ExternArg &xs = arg("xs", true), &ws = arg("ws", true), &ys = arg("ys", true);
        const int64_t m = dst_[1], wnum = m * (src_[1] / groups_) * kernel_[0] * kernel_[1];
        KILN_CHECK(is_q8(x.dtype) && is_q8(y.dtype) && shape_numel(x.shape) == src_[0] * src_[1] * src_[2] * src_[3] &&
                       shape_numel(y.shape) == dst_[0] * m * dst_[2] * dst_[3] && w.dtype == DType::kInt8 &&
                       shape_numel(w.shape) == wnum && xs.dtype == DType::kFloat32 && ys.dtype == DType::kFloat32 &&
                       ws.dtype == DType::kFloat32 && shape_numel(ws.shape) == (per_channel_ ? m : 1),
                   kInvalidModel)
            << "dnnl_qconv: argument types or sizes do not match the parameters";
        KILN_CHECK(dnnl_type(x.dtype) == src_dt_ && dnnl_type(y.dtype) == dst_dt_, kInvalidModel)
            << "dnnl_qconv: x_type / y_type do not match the arguments";
        weights_ = static_cast<const int8_t*>(w.constant);
        const float sx = *static_cast<const float*>(xs.constant), sy = *static_cast<const float*>(ys.constant);
        const float* sw = static_cast<const float*>(ws.constant);
        for (size_t c = 0; c < scales_.size(); ++c) {
            const float step = sx * sw[c];  // f32 with a rounding per operation, as ONNX's multiplier
            scales_[c] = step / sy;
        }
        if (sum_arg_ >= 0) {  // the add's scales, as ratios to the sum's (ONNX Runtime's QLinearAdd)
            const ExternArg &r = arg("sum", false), &rs = arg("sum_s", true), &qs = arg("qs", true);
            KILN_CHECK(is_q8(r.dtype) && dnnl_type(r.dtype) == sum_dt_ && shape_numel(r.shape) == shape_numel(y.shape) &&
                           rs.dtype == DType::kFloat32 && shape_numel(rs.shape) == 1 && qs.dtype == DType::kFloat32 &&
                           shape_numel(qs.shape) == 1,
                       kInvalidModel)
                << "dnnl_qconv: the fused residual must be an 8-bit (" << p.str("sum_type") << ") tensor of y's "
                << shape_numel(y.shape) << " elements with one-element f32 scales; got " << shape_numel(r.shape)
                << " elements, scales of " << shape_numel(rs.shape) << " and " << shape_numel(qs.shape);
            const float s_sum = *static_cast<const float*>(qs.constant);
            conv_ratio_ = sy / s_sum;
            sum_ratio_ = *static_cast<const float*>(rs.constant) / s_sum;
        }
        if (p.has("b")) {
            const ExternArg& b = arg("b", true);
            KILN_CHECK(b.dtype == DType::kInt32 && shape_numel(b.shape) == m, kInvalidModel) << "dnnl_qconv: bias";
            const int32_t* bv = static_cast<const int32_t*>(b.constant);
            bias_.assign(bv, bv + m);
        }
        if (!x_nhwc_) src_pool_ = std::make_unique<BytePool>(static_cast<size_t>(src_[0] * src_[1] * src_[2] * src_[3]));
        maybe_depthwise();
    }

    /// A depthwise conv between int8 kernels (NHWC both sides, u8 x, no fused add) runs on Kiln's own
    /// VNNI kernel (runtime/int8_dwconv.h) where it handles the window; KILN_INT8_DW=0 keeps oneDNN.
    void maybe_depthwise() {
        const char* env = std::getenv("KILN_INT8_DW");
        if ((env && std::string(env) == "0") || !Int8DwConv::available()) return;
        if (groups_ != src_[1] || dst_[1] != src_[1] || !x_nhwc_ || !y_nhwc_ || sum_arg_ >= 0 || src_dt_ != dt::u8 ||
            !Int8DwConv::handles(kernel_[0], kernel_[1], strides_[0], strides_[1], dil_[0], dil_[1], pb_[0], pb_[1]))
            return;
        Int8DwShape s;
        s.n = src_[0], s.c = src_[1], s.h = src_[2], s.w = src_[3], s.oh = dst_[2], s.ow = dst_[3];
        s.k = kernel_[0], s.stride = strides_[0], s.pad_top = pb_[0], s.pad_left = pb_[1];
        std::vector<float> scales(static_cast<size_t>(s.c), scales_[0]);
        if (per_channel_) scales = scales_;
        dw_ = std::make_unique<Int8DwConv>(s, weights_, bias_.empty() ? nullptr : bias_.data(), scales, x_zp_, y_zp_,
                                           dst_dt_ == dt::s8);
        if (std::getenv("KILN_DNNL_VERBOSE"))
            std::fprintf(stderr, "kiln dnnl_qconv: %ldx%ldx%ldx%ld depthwise %ldx%ld/%ld: kiln int8_dwconv (VNNI)\n",
                         long(s.n), long(s.c), long(s.h), long(s.w), long(s.k), long(s.k), long(s.stride));
    }

    /// The depthwise kernel over (output row, channel block) tasks across the pool.
    Status run_depthwise(void* const* args, const kiln_kernel_env& env) {
        struct Ctx {
            const Int8DwConv* dw;
            const uint8_t* x;
            uint8_t* y;
        } ctx{dw_.get(), static_cast<const uint8_t*>(args[x_arg_]), static_cast<uint8_t*>(args[y_arg_])};
        env.parallel_for(env.pool, dw_->tasks(),
                         [](int64_t b, int64_t e, void* p) {
                             auto* cx = static_cast<Ctx*>(p);
                             cx->dw->run(cx->x, cx->y, b, e);
                         },
                         &ctx);
        if (env.stop && *env.stop) return kernel_stopped_status();
        return Status::ok_status();
    }

    memory::desc nhwc(int64_t n, int64_t c, int64_t h, int64_t w, dt t) const {
        return memory::desc({n, c, h, w}, t, tag::nhwc);
    }

    /// Rows of one band of output rows: its input rows [in0, in0 + in_rows) and the pads
    /// above and below them (the image's own pads at its edges, none inside).
    struct Band {
        int64_t out0 = 0, out_rows = 0, in0 = 0, in_rows = 0, top = 0, bottom = 0;
    };

    /// The primitive descriptor of `n` images and output channels [m0, m0 + mc), or of output
    /// rows `band` of one image (all channels).
    dnnl::convolution_forward::primitive_desc make_pd(int64_t n, int64_t m0, int64_t mc,
                                                      const Band* band = nullptr) const {
        const int64_t cg = src_[1] / groups_;
        memory::desc src = nhwc(n, src_[1], band ? band->in_rows : src_[2], src_[3], src_dt_);
        memory::desc dst = nhwc(n, mc, band ? band->out_rows : dst_[2], dst_[3], dst_dt_);
        memory::desc wei = groups_ == 1 ? memory::desc({mc, cg, kernel_[0], kernel_[1]}, dt::s8, tag::any)
                                        : memory::desc({groups_, mc / groups_, cg, kernel_[0], kernel_[1]}, dt::s8, tag::any);
        memory::desc bias = has_bias_ ? memory::desc({mc}, dt::s32, tag::x) : memory::desc();
        dnnl::primitive_attr attr;
        if (per_channel_) attr.set_output_scales(1 << 1, std::vector<float>(scales_.begin() + m0, scales_.begin() + m0 + mc));
        else attr.set_output_scales(0, scales_);
        if (x_zp_ != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {x_zp_});
        if (y_zp_ != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {y_zp_});
        if (sum_arg_ >= 0) attr.set_post_ops(sum_post_ops());
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        memory::dims dil = {dil_[0] - 1, dil_[1] - 1};
        using C = dnnl::convolution_forward;
        const memory::dims top = {band ? band->top : pb_[0], pb_[1]}, bottom = {band ? band->bottom : pe_[0], pe_[1]};
        return C::primitive_desc(C::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                         wei, bias, dst, {strides_[0], strides_[1]}, dil, top, bottom),
                                 attr, cpu_engine());
    }

    /// The fused residual add: the conv's value rounded (half to even) and saturated to its own
    /// 8-bit type, less its zero point, as the file's QuantizeLinear does; then times s_c / s_y
    /// plus (r - r_zp) * s_r / s_y, where oneDNN adds y_zp, rounds and saturates once more.
    dnnl::post_ops sum_post_ops() const {
        dnnl::post_ops po;
        const float lo = c_signed_ ? -128.f : 0.f, hi = c_signed_ ? 127.f : 255.f;
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, lo - static_cast<float>(c_zp_), hi - static_cast<float>(c_zp_));
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, conv_ratio_, 0.f);
        po.append_sum(sum_ratio_, sum_zp_, sum_dt_);
        return po;
    }

    /// Output rows [o0, o1) of one image and the input rows they read (with the window's halo).
    Band band_of(int64_t o0, int64_t o1) const {
        const int64_t ext = (kernel_[0] - 1) * dil_[0] + 1;
        const int64_t first = o0 * strides_[0] - pb_[0], last = (o1 - 1) * strides_[0] - pb_[0] + ext - 1;
        Band b;
        b.out0 = o0, b.out_rows = o1 - o0;
        b.in0 = std::max<int64_t>(0, first);
        b.in_rows = std::min(src_[2], last + 1) - b.in0;
        b.top = b.in0 - first, b.bottom = last + 1 - (b.in0 + b.in_rows);
        return b;
    }

    /// A part's primitive for `pd` over output channels [m0, m0 + mc): its weights (those of an
    /// `earlier` part when it has the same layout, else the constant's slice reordered), bias
    /// slice, layouts and scratchpad; the caller sets where it reads and writes.
    QPart start_part(const dnnl::convolution_forward::primitive_desc& pd, int64_t m0, int64_t mc,
                     const std::vector<QPart>& earlier) const {
        QPart p;
        p.prim = dnnl::convolution_forward(pd);
        for (const QPart& e : earlier)
            if (e.weights.get_desc() == pd.weights_desc()) p.weights = e.weights;
        if (!p.weights) {
            const int64_t cg = src_[1] / groups_, taps = kernel_[0] * kernel_[1];
            memory::desc plain = groups_ == 1 ? memory::desc({mc, cg, kernel_[0], kernel_[1]}, dt::s8, tag::oihw)
                                              : memory::desc({groups_, mc / groups_, cg, kernel_[0], kernel_[1]},
                                                             dt::s8, tag::goihw);
            memory wsrc(plain, cpu_engine(), const_cast<int8_t*>(weights_ + m0 * cg * taps));
            p.weights = memory(pd.weights_desc(), cpu_engine());
            advise_huge_pages(p.weights.get_data_handle(), pd.weights_desc().get_size());
            dnnl::stream s(cpu_engine());
            dnnl::reorder(wsrc, p.weights).execute(s, wsrc, p.weights);
            s.wait();
        }
        if (!bias_.empty()) {
            p.bias.assign(bias_.begin() + m0, bias_.begin() + m0 + mc);
            p.bias_md = pd.bias_desc();
        }
        p.dst_nhwc = pd.dst_desc();
        p.src_nhwc = pd.src_desc();
        p.scratch_md = pd.scratchpad_desc();
        if (p.scratch_md.get_size() > 0) p.scratch = std::make_unique<BytePool>(p.scratch_md.get_size());
        return p;
    }

    /// A band of output rows of one image (all output channels) written in place into the NHWC
    /// y: the band of an NHWC tensor is one contiguous run, the input's too, so nothing is
    /// copied (a block of output channels is a strided slice: written to a buffer of its own,
    /// then reordered into y). The weights are shared with an earlier part of the same layout.
    QPart make_row_part(const Band& band, const std::vector<QPart>& earlier) const {
        QPart p = start_part(make_pd(1, 0, dst_[1], &band), 0, dst_[1], earlier);
        p.src_off = band.in0 * src_[3] * src_[1];
        p.dst_off = band.out0 * dst_[3] * dst_[1];
        return p;
    }

    QPart make_part(int64_t n0, int64_t n, int64_t m0, int64_t mc) const {
        QPart p = start_part(make_pd(n, m0, mc), m0, mc, {});
        const int64_t ohw = dst_[2] * dst_[3];
        p.src_off = n0 * src_[1] * src_[2] * src_[3];
        if (y_nhwc_ && mc == dst_[1]) {  // whole images in Kiln's NHWC y: written in place
            p.dst_off = n0 * dst_[1] * ohw;
        } else {
            // Kiln's slice: n images of mc channels, NCHW (image stride M * OH * OW) or NHWC
            // (channel stride 1, pixel stride M).
            const int64_t m = dst_[1];
            p.dst_off = y_nhwc_ ? n0 * m * ohw + m0 : (n0 * m + m0) * ohw;
            memory::dims st = y_nhwc_ ? memory::dims{m * ohw, 1, dst_[3] * m, m} : memory::dims{m * ohw, ohw, dst_[3], 1};
            p.dst_kiln = memory::desc({n, mc, dst_[2], dst_[3]}, dst_dt_, st);
            if (y_nhwc_) p.slice_pixels = n * ohw, p.slice_channels = mc;
            p.dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.dst_nhwc, cpu_engine(), p.dst_kiln));
            p.dst_tmp = std::make_unique<BytePool>(p.dst_nhwc.get_size());
            if (sum_arg_ >= 0) {  // the residual's slice, in Kiln's layout, into the part's NHWC buffer
                p.sum_kiln = memory::desc({n, mc, dst_[2], dst_[3]}, sum_dt_, st);
                p.sum_nhwc = nhwc(n, mc, dst_[2], dst_[3], sum_dt_);
                p.sum_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.sum_kiln, cpu_engine(), p.sum_nhwc));
            }
        }
        return p;
    }

    /// Whole images per part where the batch splits evenly; else, one image into an NHWC y,
    /// bands of output rows; else (groups == 1) blocks of 16 output channels; else one part.
    std::vector<QPart>& parts_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it != plans_.end()) return it->second;
        omp_set_num_threads(1);
        std::vector<QPart> parts;
        const int64_t n = src_[0], m = dst_[1];
        if (threads > 1 && n % threads == 0) {
            for (int64_t i = 0; i < threads; ++i) parts.push_back(make_part(i * (n / threads), n / threads, 0, m));
        } else if (threads > 1 && n == 1 && y_nhwc_ && dst_[2] >= 2 * threads && rows_balance(threads)) {
            const int64_t oh = dst_[2];
            for (int64_t i = 0; i < threads; ++i) parts.push_back(make_row_part(band_of(oh * i / threads, oh * (i + 1) / threads), parts));
        } else if (threads > 1 && groups_ == 1 && m >= 32 && m % 16 == 0) {
            const int64_t blocks = m / 16, k = std::min<int64_t>(threads, blocks);
            for (int64_t img = 0; img < n; ++img)
                for (int64_t i = 0; i < k; ++i) {
                    const int64_t b0 = blocks * i / k, b1 = blocks * (i + 1) / k;
                    parts.push_back(make_part(img, 1, b0 * 16, (b1 - b0) * 16));
                }
        } else {
            parts.push_back(make_part(0, n, 0, m));
        }
        if (std::getenv("KILN_DNNL_VERBOSE"))  // what oneDNN chose, per kernel and thread count
            std::fprintf(stderr, "kiln dnnl_qconv: %ldx%ldx%ldx%ld -> %ld, %d thread(s): %zu part(s), %s\n",
                         long(src_[0]), long(src_[1]), long(src_[2]), long(src_[3]), long(dst_[1]), threads,
                         parts.size(), make_pd(src_[0], 0, dst_[1]).impl_info_str());
        return plans_.emplace(threads, std::move(parts)).first->second;
    }

    /// Whether bands of output rows split evenly enough over `threads` (the largest band at most
    /// 10% over the mean): a 7-row layer over two threads ran 4 rows against 3, where blocks of
    /// output channels split evenly but each goes through a buffer of its own, copied into y's
    /// slice pixel by pixel (1-2 us): worth it from a few million multiply-adds (per-node minima at
    /// two threads: ResNet-50's 7x7 layers, 51-115M, 1311-1471 -> 1123-1207 us; MobileNetV2's
    /// 7x7 1x1 convs, 7-20M, 100-103 -> 96-98 us). KILN_INT8_ROW_BANDS=1: bands always.
    bool rows_balance(int threads) const {
        const char* env = std::getenv("KILN_INT8_ROW_BANDS");
        const int64_t macs = dst_[1] * dst_[2] * dst_[3] * (src_[1] / groups_) * kernel_[0] * kernel_[1];
        if ((env && std::string(env) == "1") || groups_ != 1 || dst_[1] < 32 || dst_[1] % 16 != 0 || macs < (4 << 20))
            return true;
        const int64_t oh = dst_[2], largest = (oh + threads - 1) / threads;
        return largest * threads * 10 <= oh * 11;
    }

    /// x (NCHW) -> NHWC in bands of rows across the pool.
    void reorder_src(const uint8_t* x, uint8_t* out, const kiln_kernel_env& env, int threads) {
        const int64_t bands = std::min<int64_t>(src_[2], std::max(1, threads));
        struct Ctx {
            const DnnlQConv* self;
            const uint8_t* x;
            uint8_t* out;
            int64_t bands;
        } ctx{this, x, out, bands};
        env.parallel_for(env.pool, bands,
                         [](int64_t b, int64_t e, void* p) {
                             auto* cx = static_cast<Ctx*>(p);
                             for (int64_t i = b; i < e; ++i) cx->self->reorder_band(cx->x, cx->out, i, cx->bands);
                         },
                         &ctx);
    }

    void reorder_band(const uint8_t* x, uint8_t* out, int64_t band, int64_t bands) const {
        omp_set_num_threads(1);
        const int64_t n = src_[0], c = src_[1], h = src_[2], w = src_[3];
        const int64_t h0 = h * band / bands, h1 = h * (band + 1) / bands;
        if (h1 <= h0) return;
        if (fast_interleave(c)) {  // a 3-channel stem's input: byte permutes, not oneDNN's reorder
            for (int64_t img = 0; img < n; ++img) {
                const uint8_t* planes[3];
                for (int64_t ch = 0; ch < 3; ++ch) planes[ch] = x + ((img * c + ch) * h + h0) * w;
                interleave_planes(planes, c, (h1 - h0) * w, out + ((img * h + h0) * w) * c);
            }
            return;
        }
        memory::dims dims = {n, c, h1 - h0, w};
        memory::desc from(dims, src_dt_, memory::dims{c * h * w, h * w, w, 1});
        memory::desc to(dims, src_dt_, memory::dims{h * w * c, 1, w * c, c});
        memory a(from, cpu_engine(), const_cast<uint8_t*>(x) + h0 * w);
        memory b(to, cpu_engine(), out + h0 * w * c);
        dnnl::stream s(cpu_engine());
        dnnl::reorder(a, b).execute(s, a, b);
        s.wait();
    }

    Status run_part(QPart& p, uint8_t* src, uint8_t* dst, const uint8_t* sum) {
        try {
            omp_set_num_threads(1);
            dnnl::stream s(cpu_engine());
            Lease tmp(p.dst_tmp.get()), scratch(p.scratch.get());
            memory out(p.dst_nhwc, cpu_engine(), p.dst_tmp ? tmp.get() : dst + p.dst_off);
            const int64_t mc = p.slice_channels, m_all = dst_[1];
            if (sum && p.dst_tmp && mc > 0) {  // the residual where oneDNN's sum post-op reads it: dst itself
                copy_runs(tmp.get(), mc, sum + p.dst_off, m_all, p.slice_pixels, mc);
            } else if (sum && p.dst_tmp) {
                memory from(p.sum_kiln, cpu_engine(), const_cast<uint8_t*>(sum) + p.dst_off);
                memory to(p.sum_nhwc, cpu_engine(), tmp.get());
                p.sum_reorder.execute(s, from, to);
            } else if (sum && sum != dst) {  // one contiguous run (whole NHWC images or a band of rows)
                std::memcpy(dst + p.dst_off, sum + p.dst_off, p.dst_nhwc.get_size());
            }
            std::unordered_map<int, memory> m = {
                {DNNL_ARG_SRC, memory(p.src_nhwc, cpu_engine(), src + p.src_off)},
                {DNNL_ARG_WEIGHTS, p.weights},
                {DNNL_ARG_DST, out}};
            if (!p.bias.empty()) m[DNNL_ARG_BIAS] = memory(p.bias_md, cpu_engine(), p.bias.data());
            if (scratch.get()) m[DNNL_ARG_SCRATCHPAD] = memory(p.scratch_md, cpu_engine(), scratch.get());
            p.prim.execute(s, m);
            s.wait();
            if (p.dst_tmp && mc > 0) {
                copy_runs(dst + p.dst_off, m_all, tmp.get(), mc, p.slice_pixels, mc);
            } else if (p.dst_tmp) {
                memory kiln(p.dst_kiln, cpu_engine(), dst + p.dst_off);
                p.dst_reorder.execute(s, out, kiln);
                s.wait();
            }
            return Status::ok_status();
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    std::vector<int64_t> src_, dst_, kernel_, strides_, dil_, pb_, pe_;
    int64_t groups_ = 1, x_arg_ = -1, y_arg_ = -1;
    int32_t x_zp_ = 0, y_zp_ = 0;
    // A fused residual add (sum_arg_ >= 0): the conv's own zero point and type, the residual's.
    int64_t sum_arg_ = -1;
    int32_t c_zp_ = 0, sum_zp_ = 0;
    bool c_signed_ = false;
    dt sum_dt_ = dt::u8;
    float conv_ratio_ = 1.f, sum_ratio_ = 1.f;  // s_c / s_y, s_r / s_y
    bool per_channel_ = false, has_bias_ = false;
    bool x_nhwc_ = false, y_nhwc_ = false;  // the activations' layouts in Kiln's buffers (else NCHW)
    dt src_dt_, dst_dt_;
    std::vector<float> scales_;
    std::vector<int32_t> bias_;
    const int8_t* weights_ = nullptr;
    std::unique_ptr<BytePool> src_pool_;
    std::unique_ptr<Int8DwConv> dw_;  // Kiln's depthwise kernel, where it runs the step
    std::mutex mu_;
    std::map<int, std::vector<QPart>> plans_;

};

/// QLinearMatMul: A [M, K] (any leading dims folded into M) x constant B [K, N] s8 -> Y [M, N],
/// all row-major (oneDNN's plain layouts: no reorders of activations). Parameters: a, as, az, b,
/// bs, bz, ys, yz, y (argument indices), m, k, n, a_zp, y_zp (values), per_column=0|1,
/// a_type, y_type (u8 | s8). Split across threads by rows (blocks of at least 16).
class DnnlQMatMul final : public ExternKernel {
public:
    DnnlQMatMul(const ExternParams& p, const std::vector<ExternArg>& args) {
        m_ = p.integer("m"), k_ = p.integer("k"), n_ = p.integer("n");
        a_arg_ = p.integer("a"), y_arg_ = p.integer("y");
        a_zp_ = static_cast<int32_t>(p.integer("a_zp")), y_zp_ = static_cast<int32_t>(p.integer("y_zp"));
        a_dt_ = p.str("a_type") == "s8" ? dt::s8 : dt::u8;
        y_dt_ = p.str("y_type") == "s8" ? dt::s8 : dt::u8;
        const bool per_column = p.integer_or("per_column", 0) != 0;
        auto arg = [&](const char* key) -> const ExternArg& {
            const int64_t i = p.integer(key);
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()), kInvalidModel)
                << "dnnl_qmatmul: argument '" << key << "' is not one of the step's";
            return args[i];
        };
        const ExternArg &a = arg("a"), &b = arg("b"), &y = arg("y"), &as = arg("as"), &bs = arg("bs"), &ys = arg("ys");
        KILN_CHECK(m_ > 0 && k_ > 0 && n_ > 0 && shape_numel(a.shape) == m_ * k_ && shape_numel(y.shape) == m_ * n_ &&
                       b.constant && b.dtype == DType::kInt8 && shape_numel(b.shape) == k_ * n_ && as.constant &&
                       bs.constant && ys.constant && as.dtype == DType::kFloat32 && bs.dtype == DType::kFloat32 &&
                       ys.dtype == DType::kFloat32 && shape_numel(bs.shape) == (per_column ? n_ : 1) &&
                       is_q8(a.dtype) && is_q8(y.dtype) && dnnl_type(a.dtype) == a_dt_ && dnnl_type(y.dtype) == y_dt_,
                   kInvalidModel)
            << "dnnl_qmatmul: argument types or sizes do not match the parameters";
        b_ = static_cast<const int8_t*>(b.constant);
        const float sa = *static_cast<const float*>(as.constant), sy = *static_cast<const float*>(ys.constant);
        for (int64_t c = 0; c < (per_column ? n_ : 1); ++c) {
            const float step = sa * static_cast<const float*>(bs.constant)[c];  // f32, as ONNX's multiplier
            scales_.push_back(step / sy);
        }
        per_column_ = per_column;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            std::vector<Part>& parts = parts_for(std::max(1, threads));
            Status st = run_extern_parts(env, static_cast<int64_t>(parts.size()),
                                         [&](int64_t i) { return run_part(parts[i], args); });
            if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return st;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

private:
    struct Part {
        dnnl::matmul prim;
        memory weights;
        memory::desc a, y, scratch_md;
        int64_t row0 = 0;
        std::unique_ptr<BytePool> scratch;
    };

    Part make_part(int64_t row0, int64_t rows) const {
        Part p;
        p.row0 = row0;
        p.a = memory::desc({rows, k_}, a_dt_, tag::ab);
        p.y = memory::desc({rows, n_}, y_dt_, tag::ab);
        memory::desc w({k_, n_}, dt::s8, tag::any);
        dnnl::primitive_attr attr;
        attr.set_output_scales(per_column_ ? 1 << 1 : 0, scales_);
        if (a_zp_ != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {a_zp_});
        if (y_zp_ != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {y_zp_});
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, w, p.y), attr, cpu_engine());
        p.prim = dnnl::matmul(pd);
        memory plain(memory::desc({k_, n_}, dt::s8, tag::ab), cpu_engine(), const_cast<int8_t*>(b_));
        p.weights = memory(pd.weights_desc(), cpu_engine());
        advise_huge_pages(p.weights.get_data_handle(), pd.weights_desc().get_size());
        dnnl::stream s(cpu_engine());
        dnnl::reorder(plain, p.weights).execute(s, plain, p.weights);
        s.wait();
        p.scratch_md = pd.scratchpad_desc();
        if (p.scratch_md.get_size() > 0) p.scratch = std::make_unique<BytePool>(p.scratch_md.get_size());
        if (std::getenv("KILN_DNNL_VERBOSE"))
            std::fprintf(stderr, "kiln dnnl_qmatmul: %ldx%ldx%ld rows %ld: %s\n", long(m_), long(k_), long(n_),
                         long(rows), pd.impl_info_str());
        return p;
    }

    std::vector<Part>& parts_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it != plans_.end()) return it->second;
        omp_set_num_threads(1);
        const int64_t k = std::max<int64_t>(1, std::min<int64_t>(threads, m_ / 16));
        std::vector<Part> parts;
        for (int64_t i = 0; i < k; ++i) parts.push_back(make_part(m_ * i / k, m_ * (i + 1) / k - m_ * i / k));
        return plans_.emplace(threads, std::move(parts)).first->second;
    }

    Status run_part(Part& p, void* const* args) {
        try {
            omp_set_num_threads(1);
            dnnl::stream s(cpu_engine());
            Lease scratch(p.scratch.get());
            std::unordered_map<int, memory> m = {
                {DNNL_ARG_SRC, memory(p.a, cpu_engine(), static_cast<uint8_t*>(args[a_arg_]) + p.row0 * k_)},
                {DNNL_ARG_WEIGHTS, p.weights},
                {DNNL_ARG_DST, memory(p.y, cpu_engine(), static_cast<uint8_t*>(args[y_arg_]) + p.row0 * n_)}};
            if (scratch.get()) m[DNNL_ARG_SCRATCHPAD] = memory(p.scratch_md, cpu_engine(), scratch.get());
            p.prim.execute(s, m);
            s.wait();
            return Status::ok_status();
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    int64_t m_ = 0, k_ = 0, n_ = 0, a_arg_ = -1, y_arg_ = -1;
    int32_t a_zp_ = 0, y_zp_ = 0;
    dt a_dt_ = dt::u8, y_dt_ = dt::u8;
    bool per_column_ = false;
    std::vector<float> scales_;
    const int8_t* b_ = nullptr;
    std::mutex mu_;
    std::map<int, std::vector<Part>> plans_;
};


/// One `post` item (topi::match_dnnl_epilogue's elementwise forms) as oneDNN's eltwise post-op.
void append_eltwise_post(dnnl::post_ops& ops, const std::string& item) {
    using alg = dnnl::algorithm;
    std::vector<std::string> f = ExternParams::split(item, ':');
    auto v = [&](size_t i) {
        KILN_CHECK(i < f.size(), kInvalidModel) << "dnnl_dqmatmul: post-op '" << item << "' lacks a parameter";
        return std::strtof(f[i].c_str(), nullptr);
    };
    static const std::map<std::string, alg> unary = {
        {"relu", alg::eltwise_relu},         {"sigmoid", alg::eltwise_logistic},   {"tanh", alg::eltwise_tanh},
        {"exp", alg::eltwise_exp},           {"gelu_erf", alg::eltwise_gelu_erf}, {"gelu_tanh", alg::eltwise_gelu_tanh},
        {"hardswish", alg::eltwise_hardswish}};
    if (auto it = unary.find(f[0]); it != unary.end()) ops.append_eltwise(1.f, it->second, 0.f, 0.f);
    else if (f[0] == "swish") ops.append_eltwise(1.f, alg::eltwise_swish, 1.f, 0.f);
    else if (f[0] == "leaky") ops.append_eltwise(1.f, alg::eltwise_relu, v(1), 0.f);
    else if (f[0] == "clip") ops.append_eltwise(1.f, alg::eltwise_clip, v(1), v(2));
    else if (f[0] == "linear") ops.append_eltwise(1.f, alg::eltwise_linear, v(1), v(2));
    else KILN_CHECK(false, kInvalidModel) << "dnnl_dqmatmul: unsupported post-op '" << item << "'";
}

/// Dynamic quantization's MatMul, MatMulInteger(A_q, B_q) -> Cast -> Mul(a_s * B_s) (-> + bias
/// -> elementwise): A [M, K] u8/s8 (leading dims folded) x constant B [K, N] s8 -> Y [M, N] f32,
///   y = float((A - a_zp) @ B) * (s1 * s2)[c]  (+ bias[c], then the post-ops)
/// with ONNX's roundings (one f32 product for the scale, one for the rescale). a_zp and the
/// scales are read per call (oneDNN's run-time zero point and output scales: A's quantization
/// parameters come from DynamicQuantizeLinear). Parameters: a, az (optional), b, s1, s2
/// (optional; one element or N each), bias (optional, N floats), y, m, k, n, a_type, post
/// (elementwise items, and add:ARG / mul:ARG of an [M, N] float tensor: a residual).
class DnnlDynQMatMul final : public ExternKernel {
public:
    DnnlDynQMatMul(const ExternParams& p, const std::vector<ExternArg>& args) {
        m_ = p.integer("m"), k_ = p.integer("k"), n_ = p.integer("n");
        a_dt_ = p.str("a_type") == "s8" ? dt::s8 : dt::u8;
        auto arg = [&](const char* key, bool optional) -> const ExternArg* {
            const int64_t i = optional ? p.integer_or(key, -1) : p.integer(key);
            if (optional && i < 0) return nullptr;
            KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()), kInvalidModel)
                << "dnnl_dqmatmul: argument '" << key << "' is not one of the step's";
            return &args[i];
        };
        const ExternArg &a = *arg("a", false), &b = *arg("b", false), &y = *arg("y", false), &s1 = *arg("s1", false);
        const ExternArg *az = arg("az", true), *s2 = arg("s2", true), *bias = arg("bias", true);
        auto scale_ok = [&](const ExternArg* s) {
            return !s || (s->dtype == DType::kFloat32 && (shape_numel(s->shape) == 1 || shape_numel(s->shape) == n_));
        };
        KILN_CHECK(m_ > 0 && k_ > 0 && n_ > 0 && shape_numel(a.shape) == m_ * k_ && shape_numel(y.shape) == m_ * n_ &&
                       b.constant && b.dtype == DType::kInt8 && shape_numel(b.shape) == k_ * n_ && is_q8(a.dtype) &&
                       dnnl_type(a.dtype) == a_dt_ && y.dtype == DType::kFloat32 && scale_ok(&s1) && scale_ok(s2) &&
                       (!az || (az->dtype == a.dtype && shape_numel(az->shape) == 1)) &&
                       (!bias || (bias->dtype == DType::kFloat32 && shape_numel(bias->shape) == n_)),
                   kInvalidModel)
            << "dnnl_dqmatmul: argument types or sizes do not match the parameters";
        b_ = static_cast<const int8_t*>(b.constant);
        a_arg_ = p.integer("a"), y_arg_ = p.integer("y"), s1_arg_ = p.integer("s1");
        az_arg_ = p.integer_or("az", -1), s2_arg_ = p.integer_or("s2", -1), bias_arg_ = p.integer_or("bias", -1);
        s1_n_ = shape_numel(s1.shape), s2_n_ = s2 ? shape_numel(s2->shape) : 1;
        per_column_ = (s1_n_ == n_ || s2_n_ == n_) && n_ != 1;
        posts_ = p.list("post");
        for (size_t i = 0; i < posts_.size(); ++i) {
            if (posts_[i].rfind("add:", 0) != 0 && posts_[i].rfind("mul:", 0) != 0) continue;
            const int64_t t = std::strtoll(posts_[i].c_str() + 4, nullptr, 10);
            KILN_CHECK(t >= 0 && t < static_cast<int64_t>(args.size()) && args[t].dtype == DType::kFloat32 &&
                           shape_numel(args[t].shape) == m_ * n_,
                       kInvalidModel)
                << "dnnl_dqmatmul: post-op '" << posts_[i] << "' is not a float32 [M, N] argument";
            tensor_posts_.emplace_back(static_cast<int>(i) + (bias_arg_ >= 0 ? 1 : 0), t);
        }
        // A few rows with no post-ops: the VNNI GEMV (int8_gemv.h); KILN_INT8_GEMV=0 keeps oneDNN.
        const char* gemv = std::getenv("KILN_INT8_GEMV");
        if (m_ <= Int8Gemv::kMaxRows && posts_.empty() && !(gemv && std::string(gemv) == "0") && Int8Gemv::available())
            gemv_ = std::make_unique<Int8Gemv>(b_, k_, n_);
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            if (gemv_) return run_gemv(call_args(args), env, std::max(1, threads));
            std::vector<Part>& parts = parts_for(std::max(1, threads));
            Call call = call_args(args);
            Status st = run_extern_parts(env, static_cast<int64_t>(parts.size()),
                                         [&](int64_t i) { return run_part(parts[i], call); });
            if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return st;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

private:
    struct Part {
        dnnl::matmul prim;
        memory weights;
        memory::desc a, y, scratch_md;  // y: dense rows x cols, written into Y's block (row stride N)
        int64_t row0 = 0, col0 = 0, cols = 0;
        std::unique_ptr<BytePool> scratch, y_tmp;  // y_tmp: a column block's dense result
    };
    /// This call's run-time values: the per-column scales s1 * s2 and A's zero point.
    struct Call {
        void* const* args;
        std::vector<float> scales;
        int32_t zp = 0;
    };

    Call call_args(void* const* args) const {
        Call c{args, std::vector<float>(per_column_ ? n_ : 1), 0};
        const float* s1 = static_cast<const float*>(args[s1_arg_]);
        const float* s2 = s2_arg_ >= 0 ? static_cast<const float*>(args[s2_arg_]) : nullptr;
        for (size_t i = 0; i < c.scales.size(); ++i) {
            const float x = s1[s1_n_ == 1 ? 0 : i];
            c.scales[i] = s2 ? x * s2[s2_n_ == 1 ? 0 : i] : x;  // ONNX's Mul(a_s, B_s): one f32 product
        }
        if (az_arg_ >= 0)
            c.zp = a_dt_ == dt::u8 ? *static_cast<const uint8_t*>(args[az_arg_]) : *static_cast<const int8_t*>(args[az_arg_]);
        return c;
    }

    /// The GEMV path: blocks of 64 columns split across the threads, each part's int32 sums
    /// rescaled as ONNX does it (one f32 product by the scale, then + bias).
    Status run_gemv(const Call& c, const kiln_kernel_env& env, int threads) const {
        const int64_t blocks = (n_ + 63) / 64, parts = std::min<int64_t>(threads, blocks);
        float* y = static_cast<float*>(c.args[y_arg_]);
        const float* bias = bias_arg_ >= 0 ? static_cast<const float*>(c.args[bias_arg_]) : nullptr;
        Status st = run_extern_parts(env, parts, [&](int64_t i) {
            const int64_t c0 = std::min(n_, 64 * (blocks * i / parts)), c1 = std::min(n_, 64 * (blocks * (i + 1) / parts));
            std::vector<int32_t> acc(static_cast<size_t>(m_ * (c1 - c0)));
            gemv_->run(c.args[a_arg_], m_, a_dt_ == dt::s8, c.zp, c0, c1, acc.data());
            for (int64_t r = 0; r < m_; ++r)
                for (int64_t j = c0; j < c1; ++j) {
                    float v = static_cast<float>(acc[static_cast<size_t>(r * (c1 - c0) + j - c0)]) *
                              c.scales[per_column_ ? static_cast<size_t>(j) : 0];
                    if (bias) v += bias[j];
                    y[r * n_ + j] = v;
                }
            return Status::ok_status();
        });
        if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
        return st;
    }

    /// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of Y.
    Part make_part(int64_t row0, int64_t rows, int64_t col0, int64_t cols) const {
        Part p;
        p.row0 = row0, p.col0 = col0, p.cols = cols;
        p.a = memory::desc({rows, k_}, a_dt_, tag::ab);
        // Dense: oneDNN 2.6 runs a strided destination (a block of Y's columns) on its reference
        // kernel (10.9 ms for ResNet-50's 1x2048x1000 classifier): a column block computes
        // into a buffer of its own, copied into Y.
        p.y = memory::desc({rows, cols}, dt::f32, tag::ab);
        if (cols < n_) p.y_tmp = std::make_unique<BytePool>(static_cast<size_t>(rows * cols) * sizeof(float));
        memory::desc w({k_, cols}, dt::s8, tag::any);
        dnnl::primitive_attr attr;
        attr.set_output_scales(per_column_ ? 1 << 1 : 0, {DNNL_RUNTIME_F32_VAL});
        if (az_arg_ >= 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
        dnnl::post_ops ops;
        // The bias after the rescale (oneDNN's own bias would be scaled with the sum).
        if (bias_arg_ >= 0) ops.append_binary(dnnl::algorithm::binary_add, memory::desc({1, cols}, dt::f32, tag::ab));
        for (const std::string& item : posts_) {
            if (item.rfind("add:", 0) == 0 || item.rfind("mul:", 0) == 0)  // a residual [M, N]
                ops.append_binary(item[0] == 'a' ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul, p.y);
            else
                append_eltwise_post(ops, item);
        }
        attr.set_post_ops(ops);
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, w, p.y), attr, cpu_engine());
        p.prim = dnnl::matmul(pd);
        memory plain(memory::desc({k_, cols}, dt::s8, memory::dims{n_, 1}), cpu_engine(), const_cast<int8_t*>(b_ + col0));
        p.weights = memory(pd.weights_desc(), cpu_engine());
        advise_huge_pages(p.weights.get_data_handle(), pd.weights_desc().get_size());
        dnnl::stream s(cpu_engine());
        dnnl::reorder(plain, p.weights).execute(s, plain, p.weights);
        s.wait();
        p.scratch_md = pd.scratchpad_desc();
        if (p.scratch_md.get_size() > 0) p.scratch = std::make_unique<BytePool>(p.scratch_md.get_size());
        if (std::getenv("KILN_DNNL_VERBOSE"))
            std::fprintf(stderr, "kiln dnnl_dqmatmul: %ldx%ldx%ld rows %ld cols %ld: %s\n", long(m_), long(k_),
                         long(n_), long(rows), long(cols), pd.impl_info_str());
        return p;
    }

    std::vector<Part>& parts_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it != plans_.end()) return it->second;
        omp_set_num_threads(1);
        // Rows of at least 16 per part; a few rows (a classifier's batch-1 GEMV: one thread read
        // all of B, 0.24 ms of a QDQ ResNet-50's 6.8) split their columns in blocks of 64.
        const int64_t k = std::max<int64_t>(1, std::min<int64_t>(threads, m_ / 16));
        std::vector<Part> parts;
        if (k == 1 && threads > 1 && n_ >= 128 && tensor_posts_.empty()) {
            const int64_t blocks = (n_ + 63) / 64, c = std::min<int64_t>(threads, blocks);
            for (int64_t i = 0; i < c; ++i) {
                const int64_t c0 = std::min(n_, 64 * (blocks * i / c)), c1 = std::min(n_, 64 * (blocks * (i + 1) / c));
                parts.push_back(make_part(0, m_, c0, c1 - c0));
            }
        } else {
            for (int64_t i = 0; i < k; ++i) parts.push_back(make_part(m_ * i / k, m_ * (i + 1) / k - m_ * i / k, 0, n_));
        }
        return plans_.emplace(threads, std::move(parts)).first->second;
    }

    Status run_part(Part& p, const Call& c) {
        try {
            omp_set_num_threads(1);
            dnnl::stream s(cpu_engine());
            Lease scratch(p.scratch.get());
            int32_t zp = c.zp;
            Lease y_tmp(p.y_tmp.get());
            float* y = static_cast<float*>(c.args[y_arg_]) + p.row0 * n_ + p.col0;  // the part's block of Y
            const int64_t nscales = per_column_ ? p.cols : 1;
            std::unordered_map<int, memory> m = {
                {DNNL_ARG_SRC, memory(p.a, cpu_engine(), static_cast<uint8_t*>(c.args[a_arg_]) + p.row0 * k_)},
                {DNNL_ARG_WEIGHTS, p.weights},
                {DNNL_ARG_DST, memory(p.y, cpu_engine(), y_tmp.get() ? static_cast<void*>(y_tmp.get()) : y)},
                {DNNL_ARG_ATTR_OUTPUT_SCALES,
                 memory({{nscales}, dt::f32, tag::a}, cpu_engine(),
                        const_cast<float*>(c.scales.data()) + (per_column_ ? p.col0 : 0))}};
            if (az_arg_ >= 0)
                m[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory({{1}, dt::s32, tag::a}, cpu_engine(), &zp);
            if (bias_arg_ >= 0)
                m[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
                    memory({{1, p.cols}, dt::f32, tag::ab}, cpu_engine(), static_cast<float*>(c.args[bias_arg_]) + p.col0);
            for (const auto& [index, arg] : tensor_posts_)  // whole rows (no column blocks with these)
                m[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] =
                    memory(p.y, cpu_engine(), static_cast<float*>(c.args[arg]) + p.row0 * n_);
            if (scratch.get()) m[DNNL_ARG_SCRATCHPAD] = memory(p.scratch_md, cpu_engine(), scratch.get());
            p.prim.execute(s, m);
            s.wait();
            if (y_tmp.get()) {
                const float* t = reinterpret_cast<const float*>(y_tmp.get());
                const int64_t rows = p.y.dims()[0];
                for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * n_, t + r * p.cols, static_cast<size_t>(p.cols) * sizeof(float));
            }
            return Status::ok_status();
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    int64_t m_ = 0, k_ = 0, n_ = 0, a_arg_ = -1, y_arg_ = -1, az_arg_ = -1, s1_arg_ = -1, s2_arg_ = -1, bias_arg_ = -1;
    int64_t s1_n_ = 1, s2_n_ = 1;
    dt a_dt_ = dt::u8;
    bool per_column_ = false;
    std::vector<std::string> posts_;
    std::vector<std::pair<int, int64_t>> tensor_posts_;  // (post-op index, argument) of add:/mul:
    const int8_t* b_ = nullptr;
    std::unique_ptr<Int8Gemv> gemv_;
    std::mutex mu_;
    std::map<int, std::vector<Part>> plans_;
};
}  // namespace

std::unique_ptr<ExternKernel> make_dnnl_qconv(const ExternParams& params, const std::vector<ExternArg>& args) {
    return std::make_unique<DnnlQConv>(params, &args);
}

std::unique_ptr<ExternKernel> make_dnnl_qmatmul(const ExternParams& params, const std::vector<ExternArg>& args) {
    return std::make_unique<DnnlQMatMul>(params, args);
}

std::unique_ptr<ExternKernel> make_dnnl_dqmatmul(const ExternParams& params, const std::vector<ExternArg>& args) {
    return std::make_unique<DnnlDynQMatMul>(params, args);
}

std::string dnnl_qconv_implementation(const ExternParams& params) {
    try {
        omp_set_num_threads(1);
        return DnnlQConv(params, nullptr).implementation();
    } catch (const dnnl::error& e) {
        if (std::getenv("KILN_DNNL_VERBOSE")) std::fprintf(stderr, "kiln dnnl_qconv: oneDNN rejects it: %s\n", e.what());
        return "";
    } catch (const Error& e) {
        if (std::getenv("KILN_DNNL_VERBOSE")) std::fprintf(stderr, "kiln dnnl_qconv: %s\n", e.what());
        return "";
    }
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
