// oneDNN convolution (1-D to 3-D), deconvolution (ONNX ConvTranspose) and matmul as extern
// kernels.
//
// oneDNN runs single-threaded (its OpenMP team is never started): a step is split into at most
// one part per intra-op thread (images, channel blocks, matrix rows or columns; runtime/
// extern_split.h), each part a primitive of
// its own, and the parts run on Kiln's pool, so `--threads N` is exact and no second runtime's
// threads spin beside the pool. Parts are made on the first run with a given thread count and
// kept; constant weights are unpacked from Kiln's layout to plain oihw / [K, N] and reordered
// once into the layout the primitive prefers (`format_tag::any`). Activations stay in Kiln's
// buffers: blocked NCHW{c} is oneDNN's nChw{c}c (one block of every channel: nhwc), plain
// tensors are plain. An NHWC image splits by bands of rows, not channels. Post-ops (the fused
// epilogue) are oneDNN eltwise, sum (the first residual add) and binary post-ops.
#if KILN_HAVE_DNNL
#include "runtime/extern_parts.h"
#include "runtime/dnnl_kernels.h"
#include "runtime/dnnl_deconv_shuffle.h"
#include "runtime/transpose_2d.h"
#include "runtime/extern_split.h"

#include <omp.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"
#include "runtime/dnnl_scratch_pool.h"
#include "runtime/dnnl_temp_pool.h"
#include "runtime/dnnl_weight_copies.h"
#include "support/huge_pages.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

/// The `post` parameter: `relu`, `clip:lo:hi`, `linear:a:b` (a*x+b), `sigmoid`, `tanh`, `exp`,
/// `gelu_erf`, `gelu_tanh`, `swish` (x * sigmoid(x)), `hardswish` (x * max(0, min(1, x / 6 + 1 / 2))),
/// `leaky:alpha`, `add:ARG`, `mul:ARG` (a tensor of the output's shape
/// and layout, argument ARG). The first `add` becomes oneDNN's sum post-op, which adds what dst
/// holds before the primitive runs (the kernel puts the residual there, or the memory plan did by
/// computing in place): oneDNN 2.6's binary add of a full tensor is slow (a ResNet-50 residual
/// conv at batch 8 ran at 7 GFLOP/s).
struct PostOps {
    struct Op {
        std::string kind;           // "sum" for the residual add
        std::vector<float> values;  // an eltwise op's parameters
    };
    std::vector<Op> ops;
    int sum_arg = -1;                         // the argument the sum post-op adds (-1: none)
    std::vector<std::pair<int, int>> binary;  // (post-op index, argument) of the binary ones
};

/// The element count of argument `arg`, which a step's parameters name, after checking that it
/// is one of the step's arguments and float32 (REVIEW.md 8: a forged artifact's parameters).
int64_t float_arg_numel(const std::vector<ExternArg>& args, int64_t arg, const char* kernel, const char* what) {
    KILN_CHECK(arg >= 0 && arg < static_cast<int64_t>(args.size()) && args[arg].dtype == DType::kFloat32, kInvalidModel)
        << kernel << ": " << what << " argument " << arg << " is not a float32 buffer of the step's " << args.size();
    return shape_numel(args[arg].shape);
}

PostOps parse_post_ops(const ExternParams& p) {
    PostOps out;
    for (const std::string& item : p.list("post")) {
        std::vector<std::string> fields = ExternParams::split(item, ':');
        PostOps::Op op{fields.at(0), {}};
        const int index = static_cast<int>(out.ops.size());
        if (op.kind == "add" || op.kind == "mul") {
            char* end = nullptr;
            const long arg = fields.size() == 2 ? std::strtol(fields[1].c_str(), &end, 10) : -1;
            KILN_CHECK(end && *end == '\0' && arg >= 0, kInvalidModel) << "dnnl post-op '" << item << "': expected KIND:ARG";
            if (op.kind == "add" && out.sum_arg < 0) {
                op.kind = "sum";
                out.sum_arg = static_cast<int>(arg);
            } else {
                out.binary.emplace_back(index, static_cast<int>(arg));
            }
        } else {
            for (size_t f = 1; f < fields.size(); ++f) op.values.push_back(std::strtof(fields[f].c_str(), nullptr));
        }
        out.ops.push_back(std::move(op));
    }
    return out;
}

/// oneDNN's post-ops for `post` on an output of layout `dst` (the binary operands' layout).
dnnl::post_ops build_post_ops(const PostOps& post, const memory::desc& dst) {
    using alg = dnnl::algorithm;
    dnnl::post_ops ops;
    for (const PostOps::Op& p : post.ops) {
        auto f = [&](size_t i) {
            KILN_CHECK(i < p.values.size(), kInvalidModel) << "dnnl post-op '" << p.kind << "' lacks a parameter";
            return p.values[i];
        };
        if (p.kind == "sum") ops.append_sum(1.f);
        else if (p.kind == "add") ops.append_binary(alg::binary_add, dst);
        else if (p.kind == "mul") ops.append_binary(alg::binary_mul, dst);
        else if (p.kind == "relu") ops.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f);
        else if (p.kind == "leaky") ops.append_eltwise(1.f, alg::eltwise_relu, f(0), 0.f);
        else if (p.kind == "clip") ops.append_eltwise(1.f, alg::eltwise_clip, f(0), f(1));
        else if (p.kind == "linear") ops.append_eltwise(1.f, alg::eltwise_linear, f(0), f(1));
        else if (p.kind == "sigmoid") ops.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f);
        else if (p.kind == "tanh") ops.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f);
        else if (p.kind == "exp") ops.append_eltwise(1.f, alg::eltwise_exp, 0.f, 0.f);
        else if (p.kind == "gelu_erf") ops.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f);
        else if (p.kind == "gelu_tanh") ops.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f);
        else if (p.kind == "swish") ops.append_eltwise(1.f, alg::eltwise_swish, 1.f, 0.f);  // x * sigmoid(1 * x)
        else if (p.kind == "hardswish") ops.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f);
        else KILN_CHECK(false, kInvalidModel) << "unknown dnnl post-op '" << p.kind << "'";
    }
    return ops;
}

/// A buffer of a TempPool for the current call (none when the pool is null).
class TempLease {
public:
    explicit TempLease(const std::shared_ptr<TempPool>& pool) : pool_(pool.get()) {
        if (pool_) mem_ = pool_->take();
    }
    ~TempLease() {
        if (pool_) pool_->give(std::move(mem_));
    }
    TempLease(const TempLease&) = delete;
    TempLease& operator=(const TempLease&) = delete;
    explicit operator bool() const { return pool_ != nullptr; }
    memory& get() { return mem_; }

private:
    TempPool* pool_;
    memory mem_;
};

/// One part of a split step: a primitive over a slice of the work, with the element offsets of
/// its slices in Kiln's buffers. Slices keep every dim of size > 1 at the dense strides of the
/// slice's own dims (whole images, or channel blocks of a single image, or matrix rows), so the
/// primitive is made with dense descriptors and run on offset pointers.
struct Part {
    dnnl::primitive prim;
    memory weights;                // this part's constant weights in the primitive's layout
    memory::desc src, dst;         // Kiln's layouts of the slices
    memory::desc bias;             // slice of the bias (empty: none)
    int64_t src_off = 0, dst_off = 0, bias_off = 0;  // elements
    /// Activations oneDNN wants in another layout: reordered into a buffer of `src_tmp` before
    /// the primitive and out of one of `dst_tmp` after it (null: Kiln's layout is used).
    std::shared_ptr<TempPool> src_tmp, dst_tmp;
    memory::desc scratchpad;  // the primitive's scratchpad, lent per call by ScratchPool (size 0: none)
    dnnl::reorder src_reorder, dst_reorder, sum_reorder;
    bool src_ncw = false, dst_ncw = false;  // those reorders are ncw <-> nwc: by transpose_2d
    /// Weights read per call (a training step's parameters, a computed matmul B): this part's
    /// slice in Kiln's plain layout (empty: constant weights, `weights` above), reordered per
    /// call into a buffer of `w_tmp` where the primitive wants another layout.
    memory::desc w_plain;
    int64_t w_off = 0;
    std::shared_ptr<TempPool> w_tmp;
    dnnl::reorder w_reorder;
};

struct Plan {
    std::vector<Part> parts;
    std::string impl;
    /// Every part reads the same runtime weights in the same layout (a split by images): they
    /// are reordered once per call, before the parts run, instead of once per part.
    bool shared_weights = false;
};

/// How many parts per thread a preemptible call plans at most (fewer, down to 2, where the
/// step does not split that far).
constexpr int kPreemptPartsPerThread = 4;

float* at(void* base, int64_t off) { return static_cast<float*>(base) + off; }

/// The shared machinery: plans per thread count, running the parts on Kiln's intra-op pool with
/// oneDNN itself single-threaded (so `--threads N` is exact: no OpenMP team beside the pool).
class DnnlKernel : public ExternKernel {
public:
    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        try {
            const int fixed = fixed_plan_threads();
            Plan* chosen = &plan_for(fixed > 0 ? fixed : std::max(1, threads));
            // A preemptible call (env.stop) takes finer parts where the step splits that far: a
            // stop then waits for a fraction of a thread's share instead of all of it. Parts
            // split images, channel blocks or rows, so the result is the same.
            for (int k = kPreemptPartsPerThread; env.stop && fixed == 0 && k >= 2; --k) {
                Plan& fine = plan_for(std::max(1, threads) * k);
                if (fine.parts.size() > chosen->parts.size()) {
                    chosen = &fine;
                    break;
                }
            }
            Plan& plan = *chosen;
            if (plan.parts.size() == 1) return run_part(plan.parts[0], args, nullptr);
            // Runtime weights every part reads alike: reordered once here, on the caller's thread.
            TempLease shared_w(plan.shared_weights ? plan.parts[0].w_tmp : nullptr);
            if (shared_w) {
                const Part& p0 = plan.parts[0];
                dnnl::stream s(cpu_engine());
                omp_set_num_threads(1);
                memory plain(p0.w_plain, cpu_engine(), at(args[w_arg_], p0.w_off));
                p0.w_reorder.execute(s, plain, shared_w.get());
                s.wait();
            }
            const memory* weights = shared_w ? &shared_w.get() : nullptr;
            Status st = run_extern_parts(env, static_cast<int64_t>(plan.parts.size()),
                                         [&](int64_t i) { return run_part(plan.parts[i], args, weights); });
            // A preemptible loop that stopped left parts undone (run_control.h).
            if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return st;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    /// Makes the plan a call on `threads` threads runs (its primitives, its weight copies).
    void prepare(int threads) override {
        try {
            plan_for(std::max(1, threads));
        } catch (...) {  // left to the call, which reports it
        }
    }

protected:
    /// Splits the step into at most `parts` parts and makes their primitives.
    virtual Plan make_plan(int parts) = 0;
    /// A kernel whose result depends on its split returns the thread count its plan is made
    /// for, at every call (0: planned per call, parts never change the result).
    virtual int fixed_plan_threads() const { return 0; }
    /// The shapes, for KILN_DNNL_VERBOSE.
    virtual std::string describe() const = 0;
    /// Argument indices: src (activation or A), dst, bias (-1: none), runtime weights or B (-1:
    /// constant weights).
    int64_t src_arg_ = -1, dst_arg_ = -1, bias_arg_ = -1, w_arg_ = -1;
    PostOps post_;

    /// The primitive attributes of the post-ops on a dst of `dst` (binary operands: its layout).
    dnnl::primitive_attr post_attr(const memory::desc& dst) const {
        dnnl::primitive_attr attr;
        attr.set_post_ops(build_post_ops(post_, dst));
        // The scratchpad is ours (a buffer per call, run_part): with the library's, concurrent
        // calls of one primitive (concurrent runs of a session) would share it.
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        return attr;
    }
    /// Whether `kiln` is a plain ncw activation and `dnnl` the same dims in nwc.
    static bool ncw_and_nwc(const memory::desc& kiln, const memory::desc& dnnl) {
        const memory::dims d = kiln.dims();
        return d.size() == 3 && kiln.data_type() == memory::data_type::f32 &&
               kiln == memory::desc(d, memory::data_type::f32, tag::ncw) &&
               dnnl == memory::desc(d, memory::data_type::f32, tag::nwc);
    }
    /// ncw -> nwc (to_nwc) or back, per image, for an activation of dims `desc`.
    static void ncw_nwc(const memory::desc& desc, const float* from, float* to, bool to_nwc) {
        const memory::dims d = desc.dims();
        const int64_t n = d[0], c = d[1], w = d[2];
        for (int64_t i = 0; i < n; ++i)
            transpose_2d(from + i * c * w, to_nwc ? c : w, to_nwc ? w : c, to + i * c * w);
    }
    /// Finishes part `p` for primitive descriptor `pd` (any primitive kind): temporaries and
    /// reorders where oneDNN chose another activation layout than Kiln's.
    template <typename PD>
    void finish_part(Part& p, const PD& pd) {
        p.scratchpad = pd.scratchpad_desc();
        if (pd.src_desc() != p.src) {
            p.src_tmp = std::make_shared<TempPool>(pd.src_desc());
            p.src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.src, cpu_engine(), pd.src_desc()));
            p.src_ncw = ncw_and_nwc(p.src, pd.src_desc());
        }
        if (pd.dst_desc() != p.dst) {
            KILN_CHECK(post_.binary.empty(), kUnsupported) << "dnnl: a binary post-op needs the output in oneDNN's layout";
            p.dst_tmp = std::make_shared<TempPool>(pd.dst_desc());
            p.dst_ncw = ncw_and_nwc(p.dst, pd.dst_desc());
            p.dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), pd.dst_desc(), cpu_engine(), p.dst));
            // The sum post-op's residual goes into oneDNN's layout of dst first.
            if (post_.sum_arg >= 0)
                p.sum_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.dst, cpu_engine(), pd.dst_desc()));
        }
    }
    /// Constant weights reordered from `plain` into `want` (shared by parts that want the same,
    /// and by other kernels reordering the same slice of the same constant: WeightCopies).
    /// `constant`, `offset` and `unpack` say where `plain` came from; `plain()` is asked only
    /// when no copy is held (Kiln's blocked weights are unpacked for it: a kernel made at a new
    /// shape finds the copies made at the first one and unpacks nothing).
    memory reorder_weights(const memory::desc& want, const memory::desc& plain_desc,
                           const std::function<const void*()>& plain, const void* constant, int64_t offset,
                           const std::string& unpack) {
        const std::pair<const void*, int64_t> source{constant, offset};
        for (const memory& m : weights_cache_)
            if (m.get_desc() == want && source == weights_src_) return m;
        std::shared_ptr<memory> copy = WeightCopies::global().get(constant, offset, unpack, want, [&] {
            memory src(plain_desc, cpu_engine(), const_cast<void*>(plain()));
            memory dst(want, cpu_engine());
            advise_huge_pages(dst.get_data_handle(), want.get_size());  // before the reorder writes it
            dnnl::stream s(cpu_engine());
            dnnl::reorder(src, dst).execute(s, src, dst);
            s.wait();
            return dst;
        });
        weights_held_.push_back(copy);
        weights_src_ = source;
        weights_cache_.push_back(*copy);
        return *copy;
    }
    void forget_weight_sources() { weights_src_ = {}; weights_cache_.clear(); }
    /// Runtime weights of part `p`: Kiln's slice `plain` at element offset `off`, reordered per
    /// call where the primitive wants `want`.
    static void runtime_weights(Part& p, const memory::desc& want, const memory::desc& plain, int64_t off) {
        p.w_plain = plain;
        p.w_off = off;
        if (want != plain) {
            p.w_tmp = std::make_shared<TempPool>(want);
            p.w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), plain, cpu_engine(), want));
        }
    }
    /// Marks `plan` as sharing one per-call reorder of its runtime weights when its parts allow.
    static void share_weights(Plan& plan) {
        if (plan.parts.size() < 2 || !plan.parts[0].w_tmp) return;
        for (const Part& p : plan.parts)
            if (p.w_off != plan.parts[0].w_off || p.w_plain != plan.parts[0].w_plain || !p.w_tmp ||
                p.w_tmp->desc() != plan.parts[0].w_tmp->desc())
                return;
        plan.shared_weights = true;
    }

private:
    Status run_part(Part& p, void* const* args, const memory* weights) {
        try {
            omp_set_num_threads(1);
            dnnl::stream s(cpu_engine());
            std::unordered_map<int, memory> m;
            TempLease src_tmp(p.src_tmp), dst_tmp(p.dst_tmp);
            ScratchLease scratchpad(p.scratchpad);
            if (scratchpad) m[DNNL_ARG_SCRATCHPAD] = scratchpad.get();
            memory src(p.src, cpu_engine(), at(args[src_arg_], p.src_off));
            if (src_tmp && p.src_ncw) {
                float* to = static_cast<float*>(src_tmp.get().get_data_handle());
                ncw_nwc(p.src, at(args[src_arg_], p.src_off), to, true);
                m[DNNL_ARG_SRC] = src_tmp.get();
            } else if (src_tmp) {
                p.src_reorder.execute(s, src, src_tmp.get());
                m[DNNL_ARG_SRC] = src_tmp.get();
            } else {
                m[DNNL_ARG_SRC] = src;
            }
            memory dst(p.dst, cpu_engine(), at(args[dst_arg_], p.dst_off));
            m[DNNL_ARG_DST] = dst_tmp ? dst_tmp.get() : dst;
            if (post_.sum_arg >= 0 && dst_tmp) {  // the residual into oneDNN's layout of dst
                memory residual(p.dst, cpu_engine(), at(args[post_.sum_arg], p.dst_off));
                p.sum_reorder.execute(s, residual, dst_tmp.get());
            } else if (post_.sum_arg >= 0) {  // the residual into dst, unless the plan computes in place
                const float* residual = at(args[post_.sum_arg], p.dst_off);
                float* out = at(args[dst_arg_], p.dst_off);
                if (residual != out) std::memcpy(out, residual, p.dst.get_size());
            }
            TempLease w_tmp(weights || !p.w_plain ? nullptr : p.w_tmp);
            if (weights) {
                m[DNNL_ARG_WEIGHTS] = *weights;
            } else if (p.w_plain) {
                memory plain(p.w_plain, cpu_engine(), at(args[w_arg_], p.w_off));
                if (w_tmp) p.w_reorder.execute(s, plain, w_tmp.get());
                m[DNNL_ARG_WEIGHTS] = w_tmp ? w_tmp.get() : plain;
            } else {
                m[DNNL_ARG_WEIGHTS] = p.weights;
            }
            if (bias_arg_ >= 0) m[DNNL_ARG_BIAS] = memory(p.bias, cpu_engine(), at(args[bias_arg_], p.bias_off));
            for (const auto& [index, arg] : post_.binary)
                m[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = memory(p.dst, cpu_engine(), at(args[arg], p.dst_off));
            p.prim.execute(s, m);
            if (dst_tmp && p.dst_ncw) {
                s.wait();
                const float* from = static_cast<const float*>(dst_tmp.get().get_data_handle());
                ncw_nwc(p.dst, from, at(args[dst_arg_], p.dst_off), false);
            } else if (dst_tmp) {
                p.dst_reorder.execute(s, dst_tmp.get(), dst);
            }
            s.wait();
            return Status::ok_status();
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }
    Plan& plan_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it == plans_.end()) {
            omp_set_num_threads(1);
            it = plans_.emplace(threads, make_plan(threads)).first;
            if (std::getenv("KILN_DNNL_VERBOSE"))  // what oneDNN chose, per kernel and thread count
                std::fprintf(stderr, "kiln dnnl: %s, %d thread(s): %zu part(s), %s\n", describe().c_str(), threads,
                             it->second.parts.size(), it->second.impl.c_str());
        }
        return it->second;
    }
    mutable std::mutex mu_;
    std::map<int, Plan> plans_;
    std::pair<const void*, int64_t> weights_src_{};  // (constant, offset) of weights_cache_
    std::vector<memory> weights_cache_;
    std::vector<std::shared_ptr<memory>> weights_held_;  // this kernel's share of WeightCopies
};

memory::dims dims_of(const std::vector<int64_t>& v) { return memory::dims(v.begin(), v.end()); }

/// oneDNN's tag for Kiln's layout of a rank-`rank` activation (N, C, 1 to 3 spatial dims) of
/// `channels` channels in blocks of `block` (0: plain NC...); one block of all channels is
/// channels-last (NHWC).
tag blocked_tag(int64_t block, int64_t channels, size_t rank) {
    KILN_CHECK(rank >= 3 && rank <= 5, kInvalidModel) << "dnnl: activations of rank " << rank << " (expected 3 to 5)";
    const size_t i = rank - 3;
    if (block == 16) return std::array{tag::nCw16c, tag::nChw16c, tag::nCdhw16c}[i];
    if (block == 8) return std::array{tag::nCw8c, tag::nChw8c, tag::nCdhw8c}[i];
    if (block == 0 || block == 1) return std::array{tag::ncw, tag::nchw, tag::ncdhw}[i];  // 1: [N, C, H, W, 1]
    KILN_CHECK(block == channels, kInvalidModel) << "dnnl: unsupported channel block " << block << " of " << channels;
    return std::array{tag::nwc, tag::nhwc, tag::ndhwc}[i];
}

/// oneDNN's channels-last tag (nwc, nhwc, ndhwc) of a rank-`rank` activation.
tag channels_last(size_t rank) {
    KILN_CHECK(rank >= 3 && rank <= 5, kInvalidModel) << "dnnl: activations of rank " << rank << " (expected 3 to 5)";
    return std::array{tag::nwc, tag::nhwc, tag::ndhwc}[rank - 3];
}

int64_t product(const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
}

/// Convolution or deconvolution (ONNX ConvTranspose), 1-D to 3-D. Parameters:
///   kind=conv (default) | deconv
///   x, w, y: argument indices of the input, weights and output; b: bias argument (optional)
///   src=N,C,spatial...  dst=N,M,spatial...  kernel=the weights' spatial dims  groups=G
///   src_block / dst_block: 0 (plain NC...) or the c of NCHW{c} (2-D only; 1: NCHW's memory)
///   wei=oihw (a Conv's [M, C/G, K...]) | iohw (a ConvTranspose's [C, M/G, K...]) |
///       blocked:ci:co ([M/co, C/ci, KH, KW, ci, co]) | depthwise:c ([C/c, KH, KW, c])
///   taps_begin, taps: the window's taps that read the input (default all): taps that only ever
///       read padding (a dilated conv wider than its input) are left out, pads_begin shifted
///   strides, dilations (ONNX convention: 1 = dense), pads_begin, pads_end (of the primitive:
///       a deconv's end pad is ONNX's less output_padding); post (see PostOp)
/// Split across threads (runtime/extern_split.h): whole images, else (one image) output
/// channels in blocks of 16 (or 8: see ConvSplit) (groups == 1), or whole groups in blocks whose input and output
/// channels are multiples of 16 (depthwise: 16 channels); fewer parts than threads where the
/// step has fewer units.
class DnnlConv final : public DnnlKernel {
public:
    DnnlConv(const ExternParams& p, const std::vector<ExternArg>& args) {
        deconv_ = p.has("kind") && p.str("kind") == "deconv";
        KILN_CHECK(!p.has("kind") || deconv_ || p.str("kind") == "conv", kInvalidModel)
            << "dnnl_conv: kind must be conv or deconv, got '" << p.str("kind") << "'";
        src_arg_ = p.integer("x");
        w_ = p.integer("w");
        dst_arg_ = p.integer("y");
        bias_arg_ = p.integer_or("b", -1);
        src_ = p.ints("src");
        dst_ = p.ints("dst");
        kernel_ = p.ints("kernel");
        groups_ = p.integer_or("groups", 1);
        src_block_ = p.integer_or("src_block", 0);
        dst_block_ = p.integer_or("dst_block", 0);
        strides_ = p.ints("strides");
        dil_ = p.ints("dilations");
        pads_b_ = p.ints("pads_begin");
        pads_e_ = p.ints("pads_end");
        wei_ = p.str("wei");
        plan_threads_ = p.integer_or("plan_threads", 0);
        KILN_CHECK(plan_threads_ >= 0 && plan_threads_ <= 4096, kInvalidModel)
            << "dnnl_conv: plan_threads must be 0 to 4096, got " << plan_threads_;
        post_ = parse_post_ops(p);
        const size_t sp = kernel_.size();
        taps_begin_ = p.has("taps_begin") ? p.ints("taps_begin") : std::vector<int64_t>(sp, 0);
        taps_ = p.has("taps") ? p.ints("taps") : kernel_;
        KILN_CHECK(sp >= 1 && sp <= 3 && src_.size() == sp + 2 && dst_.size() == sp + 2 && strides_.size() == sp &&
                       dil_.size() == sp && pads_b_.size() == sp && pads_e_.size() == sp && taps_.size() == sp &&
                       taps_begin_.size() == sp,
                   kInvalidModel)
            << "dnnl_conv: 1 to 3 spatial dims, every window parameter with one entry per dim";
        for (size_t d = 0; d < sp; ++d)
            KILN_CHECK(taps_begin_[d] >= 0 && taps_[d] >= 1 && taps_begin_[d] + taps_[d] <= kernel_[d], kInvalidModel)
                << "dnnl_conv: taps outside the kernel";
        KILN_CHECK(groups_ >= 1 && src_[1] % groups_ == 0 && dst_[1] % groups_ == 0, kInvalidModel)
            << "dnnl_conv: channels not divisible by groups=" << groups_;
        KILN_CHECK(w_ < static_cast<int64_t>(args.size()), kInvalidModel) << "dnnl_conv: bad weights argument";
        KILN_CHECK(!deconv_ || wei_ == "iohw", kInvalidModel) << "dnnl_conv: a deconv's weights are iohw";
        kiln_weights_ = static_cast<const float*>(args[w_].constant);
        // Weights computed at run time (a training step's parameters, the flipped weights of a
        // data gradient) come in plain oihw / iohw and are reordered on every call.
        if (!kiln_weights_) w_arg_ = w_;
        KILN_CHECK(kiln_weights_ || wei_ == "oihw" || wei_ == "iohw", kInvalidModel)
            << "dnnl_conv: weights in layout '" << wei_ << "' must be a constant";
        // The plan is fixed only where a part may run by Winograd (no part has more channels
        // than the whole step); a direct conv keeps planning per call (finer preemptible parts).
        fixed_threads_ = winograd_shape(src_[1], dst_[1]) ? static_cast<int>(plan_threads_) : 0;
    }

    /// Every argument the parameters name is a float32 buffer of the size they imply (REVIEW.md
    /// 8: parameters from a forged artifact must not make the kernel read or write out of bounds).
    void check_buffers(const std::vector<ExternArg>& args) const {
        auto numel = [&](int64_t arg, const char* what) { return float_arg_numel(args, arg, "dnnl_conv", what); };
        const int64_t src = product(src_), dst = product(dst_), w = src_[1] / groups_ * dst_[1] * product(kernel_);
        KILN_CHECK(numel(src_arg_, "input") == src && numel(dst_arg_, "output") == dst && numel(w_, "weights") == w &&
                       (bias_arg_ < 0 || numel(bias_arg_, "bias") == dst_[1]),
                   kInvalidModel)
            << "dnnl_conv: buffer sizes do not match src " << src << ", dst " << dst << ", weights " << w;
        std::vector<int64_t> operands;
        if (post_.sum_arg >= 0) operands.push_back(post_.sum_arg);
        for (const auto& b : post_.binary) operands.push_back(b.second);
        for (int64_t arg : operands)
            KILN_CHECK(numel(arg, "post-op") == dst, kInvalidModel)
                << "dnnl_conv: a post-op operand is not of the output's size";
    }

private:
    /// The constant weights as plain [M, C/G, KH, KW], unpacked from Kiln's blocked layout on
    /// the first get() (oihw and iohw are read in place).
    class PlainWeights {
    public:
        explicit PlainWeights(const DnnlConv& conv) : conv_(conv) {}
        const float* get() {
            if (!done_) unpacked_ = conv_.unpack_weights(), done_ = true;
            return unpacked_.empty() ? conv_.kiln_weights_ : unpacked_.data();
        }

    private:
        const DnnlConv& conv_;
        std::vector<float> unpacked_;
        bool done_ = false;
    };

    /// Kiln's blocked weights -> plain [M, C/G, KH, KW] (oihw and iohw are read in place).
    std::vector<float> unpack_weights() const {
        const float* w = kiln_weights_;
        const std::string& layout = wei_;
        if (layout == "oihw" || layout == "iohw") return {};
        KILN_CHECK(kernel_.size() == 2, kInvalidModel) << "dnnl_conv: blocked weights are 2-D";
        const int64_t m = dst_[1], c = src_[1], kh = kernel_[0], kw = kernel_[1], g = groups_;
        const int64_t cg = c / g;
        std::vector<float> out(static_cast<size_t>(m * cg * kh * kw));
        if (layout.rfind("blocked:", 0) == 0) {  // [M/co, C/G/ci, KH, KW, ci, co]
            int64_t ci = std::strtoll(layout.c_str() + 8, nullptr, 10);
            int64_t co = std::strtoll(layout.c_str() + layout.rfind(':') + 1, nullptr, 10);
            KILN_CHECK(ci > 0 && co > 0 && cg % ci == 0 && (m / g) % co == 0, kInvalidModel) << "dnnl_conv: bad weights layout " << layout;
            // Read in order (no division per element: PP-OCRv4's detector unpacked in 3.8 ms).
            const float* src = w;
            for (int64_t ob = 0; ob < m / co; ++ob)
                for (int64_t ib = 0; ib < cg / ci; ++ib)
                    for (int64_t y = 0; y < kh; ++y)
                        for (int64_t x = 0; x < kw; ++x)
                            for (int64_t i = ib * ci; i < (ib + 1) * ci; ++i)
                                for (int64_t o = ob * co; o < (ob + 1) * co; ++o)
                                    out[((o * cg + i) * kh + y) * kw + x] = *src++;
        } else if (layout.rfind("depthwise:", 0) == 0) {
            int64_t cb = std::strtoll(layout.c_str() + 10, nullptr, 10);
            KILN_CHECK(cb > 0 && g == c && m == c && c % cb == 0, kInvalidModel) << "dnnl_conv: bad weights layout " << layout;
            for (int64_t ch = 0; ch < c; ++ch)
                for (int64_t y = 0; y < kh; ++y)
                    for (int64_t x = 0; x < kw; ++x)
                        out[(ch * kh + y) * kw + x] = w[(((ch / cb) * kh + y) * kw + x) * cb + ch % cb];
        } else {
            KILN_CHECK(false, kInvalidModel) << "dnnl_conv: unknown weights layout '" << layout << "'";
        }
        return out;
    }

    /// The plain weights of a part with output channels [m0, m0 + mm), cc input channels and gg
    /// groups, as a strided view (its used taps only) of the full plain weights: a Conv's
    /// [M, C/G, K...] or a ConvTranspose's [C, M/G, K...]; returns the view's element offset.
    int64_t weight_view(int64_t m0, int64_t mm, int64_t cc, int64_t gg, memory::desc& view) const {
        const int64_t cg = src_[1] / groups_, mg = dst_[1] / groups_, kfull = product(kernel_);
        const size_t sp = kernel_.size();
        std::vector<int64_t> kst(sp, 1);
        for (int d = static_cast<int>(sp) - 2; d >= 0; --d) kst[d] = kst[d + 1] * kernel_[d + 1];
        // Element strides of (group, output channel, input channel) in the full tensor.
        const int64_t gs = cg * mg * kfull, os = deconv_ ? kfull : cg * kfull, is = deconv_ ? mg * kfull : kfull;
        memory::dims dims, strides;
        if (gg > 1) {
            dims = {gg, mm / gg, cc / gg};
            strides = {gs, os, is};
        } else {
            dims = {mm, cc};
            strides = {os, is};
        }
        int64_t off = deconv_ ? (m0 / mg) * gs + (m0 % mg) * os : m0 * os;
        for (size_t d = 0; d < sp; ++d) {
            dims.push_back(taps_[d]);
            strides.push_back(kst[d]);
            off += taps_begin_[d] * kst[d];
        }
        view = memory::desc(dims, memory::data_type::f32, strides);
        return off;
    }

    /// Calls f with the (de)convolution primitive descriptor of a part, post-ops on `dst_kiln`,
    /// the pads `pads` (a band of rows' own: begin, end) or the step's.
    using Pads = std::array<std::vector<int64_t>, 2>;
    template <typename F>
    void with_pd(const memory::desc& src, const memory::desc& w, const memory::desc& bias, const memory::desc& dst,
                 const memory::desc& dst_kiln, F f, const Pads* pads = nullptr) const {
        memory::dims dil;
        for (int64_t d : dil_) dil.push_back(d - 1);
        const memory::dims s = dims_of(strides_), pb = dims_of(pads ? (*pads)[0] : pads_b_),
                           pe = dims_of(pads ? (*pads)[1] : pads_e_);
        const auto prop = dnnl::prop_kind::forward_inference;
        if (deconv_) {
            using D = dnnl::deconvolution_forward;
            f(D::primitive_desc(D::desc(prop, dnnl::algorithm::deconvolution_direct, src, w, bias, dst, s, dil, pb, pe),
                                post_attr(dst_kiln), cpu_engine()));
        } else {
            using C = dnnl::convolution_forward;
            std::optional<C::primitive_desc> pd;
            if (winograd_shape(src.dims()[1], dst.dims()[1])) {
                try {
                    const C::desc d(prop, dnnl::algorithm::convolution_winograd, src, w, bias, dst, s, dil, pb, pe);
                    pd.emplace(d, post_attr(dst_kiln), cpu_engine());
                    if (dst.dims()[2] * dst.dims()[3] >= 28 * 28) prefer_f4x4(*pd, d, post_attr(dst_kiln));
                    if (!winograd_weights_reorderable(pd->weights_desc())) pd.reset();
                } catch (const dnnl::error&) {  // not for these layouts or post-ops: direct
                    pd.reset();
                }
            }
            if (!pd)
                pd.emplace(C::desc(prop, dnnl::algorithm::convolution_direct, src, w, bias, dst, s, dil, pb, pe),
                           post_attr(dst_kiln), cpu_engine());
            f(*pd);
        }
    }

    /// Whether a part with `in` input and `out` output channels runs by Winograd's algorithm
    /// (oneDNN's F(2x2,3x3) and F(4x4,3x3), docs/kernels.md "Winograd"): a 3x3 window of all
    /// its taps, stride 1, no dilation, one group, at least 32 channels on both sides. There it
    /// took 0.33-0.63x direct's time on one thread (ResNet's 3x3 convs at batch 1 and 8; 16
    /// channels: 1.10x), with a largest error 1-5x direct's (max 1.7e-6 of max |y|).
    /// Its rounding depends on the split (the tiles of a band of rows, the variant oneDNN picks
    /// for a part's channels), so only a conv whose plan is fixed (`plan_threads`, written by
    /// the compiler) takes it: every call, whatever its threads or preemption, runs the same
    /// parts. Constant weights only: weights read per call (a training step's forward) would be
    /// transformed per call, and oneDNN 2.6's `wino_reorder` takes ~0.2 ms for 32x64x3x3
    /// (ResNet-18's step went from 229 to 436 ms on one thread). KILN_CONV_WINOGRAD=0 keeps
    /// the direct conv (for A/Bs).
    bool winograd_shape(int64_t in, int64_t out) const {
        if (plan_threads_ == 0 || !kiln_weights_ || deconv_ || kernel_.size() != 2 || groups_ != 1 || in < 32 ||
            out < 32)
            return false;
        for (size_t d = 0; d < 2; ++d)
            if (kernel_[d] != 3 || taps_[d] != 3 || strides_[d] != 1 || dil_[d] != 1) return false;
        const char* v = std::getenv("KILN_CONV_WINOGRAD");  // read when the kernel plans
        return !(v && std::string(v) == "0");
    }
    /// Moves `pd` to oneDNN's F(4x4,3x3) kernel where it offers one: oneDNN lists F(2x2,3x3)
    /// first for one image. Asked for outputs of at least 28x28. Alone (bench/winograd_sweep.cc,
    /// one thread, weights hot) F(4x4) took 0.66-0.8x F(2x2)'s time down to 14x14 on an Intel
    /// Xeon, but inside ResNet-50 its 14x14 256->256 convs took 2.0 ms against F(2x2)'s 1.3:
    /// there each call reads its transformed weights from memory (36 floats a tap pair against
    /// 16: 9.4 MB against 4.2), and at 7x7 (38 MB for 512->512) it lost alone too (1.1x Xeon,
    /// 2.4x AMD EPYC). The walk is a primitive descriptor of its own, made from `d`: walking
    /// `pd` itself after copying it (to restore it) ended at once in oneDNN 2.6, so until
    /// 2026-11-28 Kiln's calls never reached F(4x4) (the cause inside oneDNN was not pinned down).
    static void prefer_f4x4(dnnl::convolution_forward::primitive_desc& pd, const dnnl::convolution_forward::desc& d,
                            const dnnl::primitive_attr& attr) {
        dnnl::convolution_forward::primitive_desc walk(d, attr, cpu_engine());
        do {
            if (std::string(walk.impl_info_str()).find("wino_4x3") != std::string::npos) {
                pd = walk;
                return;
            }
        } while (walk.next_impl());
    }
    /// Whether the plain oihw weights reorder into a Winograd primitive's layout `want` (oneDNN
    /// transforms them in the reorder; it takes dense oihw).
    static bool winograd_weights_reorderable(const memory::desc& want) {
        try {
            dnnl::reorder::primitive_desc(cpu_engine(), memory::desc(want.dims(), memory::data_type::f32, tag::oihw),
                                          cpu_engine(), want);
            return true;
        } catch (const dnnl::error&) {
            return false;
        }
    }

    /// with_pd, but where oneDNN offers only a slow kernel for the layouts asked, asks again
    /// with other activation layouts and takes the first jit kernel, else the first GEMM one:
    /// oneDNN's choice (its brgemm convs, on NHWC, take large dilations and skip the taps that
    /// read padding), channels-last (its jit grouped convs with a channel multiplier), plain
    /// NC... (im2col + GEMM). Its nChw16c jit convs reject large dilations and fall to the
    /// reference kernel (DeepLabV3's rate-12 3x3 ran at 0.1-0.9 GFLOP/s); a depthwise conv with
    /// multiplier 2 on plain NCHW took its GEMM kernel at ~1 GFLOP/s. finish_part reorders
    /// Kiln's layout at the edges. Not with a binary post-op, which reads the output's layout.
    template <typename F>
    void with_fast_pd(const memory::desc& src, const memory::desc& w, const memory::desc& bias,
                      const memory::desc& dst, const memory::desc& dst_kiln, F f, const Pads* pads = nullptr) const {
        auto layout = [](const memory::desc& d, int kind) {
            const size_t rank = d.dims().size();
            if (kind == 0) return d;
            return memory::desc(d.dims(), memory::data_type::f32,
                                kind == 1 ? tag::any : kind == 2 ? channels_last(rank) : blocked_tag(0, 0, rank));
        };
        auto rank = [](const std::string& impl) {
            return impl.rfind("ref", 0) == 0 ? 0 : impl.find("gemm") != std::string::npos ? 1 : 2;
        };
        if (plain_pointwise()) return with_pd(layout(src, 3), w, bias, layout(dst, 3), dst_kiln, f, pads);
        int best = 0, best_rank = -1;
        for (int kind = 0; kind < (post_.binary.empty() ? 4 : 1) && best_rank < 2; ++kind) {
            try {
                with_pd(layout(src, kind), w, bias, layout(dst, kind), dst_kiln, [&](const auto& pd) {
                    const int r = rank(pd.impl_info_str());
                    if (r > best_rank) best = kind, best_rank = r;
                }, pads);
            } catch (const dnnl::error&) {  // no implementation for this layout
            }
        }
        with_pd(layout(src, best), w, bias, layout(dst, best), dst_kiln, f, pads);
    }

    /// A 1x1 conv (stride 1, no pads, one group) between plain NC... tensors: oneDNN's GEMM conv
    /// reads and writes them in place, one sgemm [M, C] x [C, HW] per image (ONNX Runtime's
    /// path). Its brgemm conv on NHWC reordered the whole input and the output around every
    /// part: ShuffleNetV2's 58- and 116-channel 1x1 convs (docs/kernels.md).
    bool plain_pointwise() const {
        if (deconv_ || groups_ != 1 || src_block_ != 0 || dst_block_ != 0 || !post_.binary.empty()) return false;
        for (size_t d = 0; d < kernel_.size(); ++d)
            if (kernel_[d] != 1 || strides_[d] != 1 || pads_b_[d] != 0 || pads_e_[d] != 0) return false;
        return true;
    }

    /// The layout asked of oneDNN for an activation of dims `d` in Kiln's block `block`:
    /// NHWC as it is on both sides (transform_layout's one block of 24, 40, 72... channels);
    /// nChw16c as it is; nChw8c as it is on both sides (its avx2 jit convs: docs/kernels.md);
    /// otherwise oneDNN's choice, except that a deconvolution computes on
    /// channels-last (oneDNN 2.6 adds a deconv's bias on nChw16c in a slow loop: 64->32 2x up at
    /// 64x64 took 7.9 ms instead of 3.7 on NHWC, the deconv itself 2.3).
    /// A training step's conv (weights computed at run time) asks nChw16c for a plain 2-D
    /// activation of whole 16-channel blocks: its jit kernel, instead of oneDNN's own pick (brgconv
    /// on NHWC); both reorder the plain tensors at the edges. ResNet-18's step (batch 16, 112x112)
    /// took 0.93-0.96x the time on 2 threads and 0.95x on 1, the digits CNN's 0.95x (interleaved
    /// in-process A/Bs, load 4-6). KILN_CONV_FWD_LAYOUT=any restores oneDNN's pick (for A/Bs).
    bool training_blocked(const std::vector<int64_t>& d, int64_t block) const {
        if (deconv_ || kiln_weights_ || block != 0 || d.size() != 4 || d[1] % 16 != 0) return false;
        const char* v = std::getenv("KILN_CONV_FWD_LAYOUT");  // read when the kernel plans
        return !(v && std::string(v) == "any");
    }

    /// Whether Kiln's activation of `channels` channels in blocks of `block` is NHWC in memory
    /// (one block of every channel, at least 8 of them).
    static bool nhwc_memory(int64_t block, int64_t channels) { return block == channels && channels >= 8; }
    /// Whether a 2-D conv has an NHWC activation that blocks of 8 or 16 could not also describe.
    bool has_nhwc_side() const {
        auto wide = [](int64_t b, int64_t c) { return nhwc_memory(b, c) && b != 8 && b != 16; };
        return src_.size() == 4 && !deconv_ && (wide(src_block_, src_[1]) || wide(dst_block_, dst_[1]));
    }
    /// Whether both activations are NHWC (one of them wider than a block of 8 or 16): asked as
    /// they are, oneDNN runs its brgemm convs (`brgconv_1x1`, `brdgmm_dw`), split by rows.
    bool nhwc_as_is() const {
        return has_nhwc_side() && nhwc_memory(src_block_, src_[1]) && nhwc_memory(dst_block_, dst_[1]);
    }

    memory::desc asked_desc(const std::vector<int64_t>& d, int64_t block) const {
        if (nhwc_as_is()) return memory::desc(dims_of(d), memory::data_type::f32, tag::nhwc);
        const bool as_is = block == 16 || (block == 8 && src_block_ == 8 && dst_block_ == 8 && !deconv_);
        if (as_is) return memory::desc(dims_of(d), memory::data_type::f32, blocked_tag(block, d[1], d.size()));
        if (training_blocked(d, block)) return memory::desc(dims_of(d), memory::data_type::f32, tag::nChw16c);
        return memory::desc(dims_of(d), memory::data_type::f32, deconv_ ? channels_last(d.size()) : tag::any);
    }

public:
    /// oneDNN's implementation of the whole step on one thread (made without weights): a
    /// "ref:" one is its reference loop nest, ~100x below a jit kernel.
    std::string implementation() const {
        std::vector<int64_t> sd = src_, dd = dst_;
        memory::desc wplain, bias;
        weight_view(0, dst_[1], src_[1], groups_, wplain);
        if (bias_arg_ >= 0) bias = memory::desc({dst_[1]}, memory::data_type::f32, tag::x);
        const memory::desc kiln_dst(dims_of(dd), memory::data_type::f32, blocked_tag(dst_block_, dd[1], dd.size()));
        std::string impl;
        with_fast_pd(asked_desc(sd, src_block_), memory::desc(wplain.dims(), memory::data_type::f32, tag::any), bias,
                     asked_desc(dd, dst_block_), kiln_dst, [&](const auto& pd) { impl = pd.impl_info_str(); });
        return impl;
    }

private:
    Plan make_plan(int threads) override {
        if (src_.size() == 4 && !deconv_ && post_.binary.empty() &&
            dnnl_conv_split_rows(src_[0], src_[1], dst_[1], groups_, dst_[2], taps_[0] * taps_[1], threads))
            return make_row_plan(std::min<int64_t>(threads, dst_[2]));
        // An NHWC image splits by bands of rows (a band of rows is contiguous), not channels.
        if (nhwc_as_is() && src_[0] == 1 && threads > 1 && post_.binary.empty() && dst_[2] >= 2)
            return make_row_plan(std::min<int64_t>(threads, dst_[2]));
        // A Winograd conv of one image whose channel parts would fall below Winograd's 32
        // channels (DenseNet's 128->32 3x3 convs on two threads: halves of 16, direct) splits
        // by bands of at least 7 output rows, each all channels, where that makes as many parts
        // as the channel split would (on many threads the channel split keeps more busy).
        if (src_.size() == 4 && src_[0] == 1 && threads > 1 && post_.binary.empty() &&
            winograd_shape(src_[1], dst_[1]) && dst_[1] / threads < 32 && dst_[2] >= 14) {
            const int64_t bands = std::min<int64_t>(threads, dst_[2] / 7);
            if (bands >= dnnl_conv_split(1, src_[1], dst_[1], 1, threads, dst_block_, src_block_).parts)
                return make_row_plan(bands);
        }
        const int64_t n = src_[0], c = src_[1], m = dst_[1], g = groups_;
        const int64_t cg = c / g, mg = m / g;
        const int64_t sin = product(std::vector<int64_t>(src_.begin() + 2, src_.end()));
        const int64_t sout = product(std::vector<int64_t>(dst_.begin() + 2, dst_.end()));
        // Split: whole images, else channel blocks or groups of one image (runtime/extern_split.h).
        // A mixed conv's NHWC output is reordered from oneDNN's layout anyway: any 8 channels slice it.
        const bool nhwc_dst = has_nhwc_side() && nhwc_memory(dst_block_, m);
        ConvSplit split = dnnl_conv_split(n, c, m, g, threads, nhwc_dst ? 0 : dst_block_, src_block_);
        if (has_nhwc_side() && split.by == ConvSplit::kGroups) split = ConvSplit{};  // channels of NHWC: not a slice
        // A plain 1x1 conv's GEMM takes any rows of W: 58 or 116 output channels split evenly.
        if (split.by == ConvSplit::kNone && n == 1 && plain_pointwise() && std::min<int64_t>(threads, m / 8) > 1)
            split = ConvSplit{ConvSplit::kChannels, std::min<int64_t>(threads, m / 8), 1, 0};
        const int64_t parts = split.parts, unit_g = split.unit_g;
        const bool by_batch = split.by == ConvSplit::kBatch;
        PlainWeights plain(*this);
        Plan plan;
        for (int64_t i = 0; i < parts; ++i) {
            int64_t n0 = 0, nn = n, m0 = 0, mm = m, c0 = 0, cc = c, gg = g;
            if (by_batch) {
                n0 = n * i / parts;
                nn = n * (i + 1) / parts - n0;
            } else if (parts > 1 && g == 1) {
                const int64_t u = split.unit_m;
                m0 = u * ((m / u) * i / parts);
                mm = u * ((m / u) * (i + 1) / parts) - m0;
            } else if (parts > 1) {
                const int64_t units = g / unit_g, g0 = unit_g * (units * i / parts);
                gg = unit_g * (units * (i + 1) / parts) - g0;
                m0 = g0 * mg, mm = gg * mg, c0 = g0 * cg, cc = gg * cg;
            }
            Part p;
            std::vector<int64_t> sd = src_, dd = dst_;
            sd[0] = dd[0] = nn;
            sd[1] = cc;
            dd[1] = mm;
            p.src = memory::desc(dims_of(sd), memory::data_type::f32, blocked_tag(src_block_, cc, sd.size()));
            p.src_off = (n0 * c + c0) * sin;
            if (nhwc_dst && mm != m) {  // channels [m0, m0 + mm) of NHWC images: a strided view
                std::vector<int64_t> whole = dd;
                whole[1] = m;
                p.dst = memory::desc(dims_of(whole), memory::data_type::f32, tag::nhwc)
                            .submemory_desc(dims_of(dd), {0, m0, 0, 0});
                p.dst_off = n0 * m * sout;
            } else {
                p.dst = memory::desc(dims_of(dd), memory::data_type::f32, blocked_tag(dst_block_, mm, dd.size()));
                p.dst_off = (n0 * m + m0) * sout;
            }
            p.bias_off = m0;
            if (bias_arg_ >= 0) p.bias = memory::desc({mm}, memory::data_type::f32, tag::x);
            // Activations not in nChw16c (plain NCHW, NCHW8c for channel counts like 24, NHWC for
            // the stem's 3 channels): let oneDNN pick (its fast kernels read nChw16c, padding the
            // channels; the first conv's few input channels it reads plain) and reorder at the
            // edges. Given a mixed layout it falls back to a reference kernel (ResNet-50's stem
            // from NHWC: 450 ms instead of 3).
            const memory::desc src = asked_desc(sd, src_block_), dst = asked_desc(dd, dst_block_);
            memory::desc wplain;
            const int64_t w_off = weight_view(m0, mm, cc, gg, wplain);
            with_fast_pd(src, memory::desc(wplain.dims(), memory::data_type::f32, tag::any), p.bias, dst, p.dst,
                    [&](const auto& pd) {
                        if (i == 0) plan.impl = pd.impl_info_str();
                        finish_conv_part(p, pd, wplain, plain, w_off);
                    });
            plan.parts.push_back(std::move(p));
        }
        forget_weight_sources();
        share_weights(plan);
        return plan;
    }

    /// Part `p`'s weights (view `wplain` of `plain` at `w_off`), primitive and reorders for `pd`.
    template <typename PD>
    void finish_conv_part(Part& p, const PD& pd, const memory::desc& wplain, PlainWeights& plain, int64_t w_off) {
        if (kiln_weights_)
            p.weights = reorder_weights(
                pd.weights_desc(), wplain, [&] { return static_cast<const void*>(plain.get() + w_off); }, kiln_weights_,
                w_off, "conv:" + wei_ + ":" + std::to_string(groups_));
        else runtime_weights(p, pd.weights_desc(), wplain, w_off);
        if constexpr (std::is_same_v<PD, dnnl::deconvolution_forward::primitive_desc>)
            p.prim = dnnl::deconvolution_forward(pd);
        else
            p.prim = dnnl::convolution_forward(pd);
        finish_part(p, pd);
    }

    /// One image in `parts` bands of output rows (runtime/extern_split.h), each all output
    /// channels: its input rows (with the window's halo; its own pads at the image's edges) are
    /// reordered into a dense buffer and its output rows back (finish_part: submemory slices).
    Plan make_row_plan(int64_t parts) {
        const int64_t c = src_[1], m = dst_[1], ih = src_[2], oh = dst_[2], ext = (taps_[0] - 1) * dil_[0] + 1;
        const int64_t g = groups_;
        const auto f32 = memory::data_type::f32;
        const memory::desc full_src(dims_of(src_), f32, blocked_tag(src_block_, c, 4));
        const memory::desc full_dst(dims_of(dst_), f32, blocked_tag(dst_block_, m, 4));
        PlainWeights plain(*this);
        memory::desc wplain;
        const int64_t w_off = weight_view(0, m, c, g, wplain);
        const bool nhwc_src = nhwc_memory(src_block_, c), nhwc_dst = nhwc_memory(dst_block_, m), as_is = nhwc_as_is();
        Plan plan;
        for (int64_t i = 0; i < parts; ++i) {
            const int64_t o0 = oh * i / parts, o1 = oh * (i + 1) / parts;
            const int64_t first = o0 * strides_[0] - pads_b_[0], last = (o1 - 1) * strides_[0] - pads_b_[0] + ext - 1;
            const int64_t i0 = std::max<int64_t>(0, first), i1 = std::min(ih, last + 1);
            KILN_CHECK(i1 > i0, kInternal) << "bug in Kiln: dnnl_conv row part " << i << " reads no input row";
            const Pads pads{{{i0 - first, pads_b_[1]}, {last + 1 - i1, pads_e_[1]}}};
            Part p;
            const std::vector<int64_t> sd = {1, c, i1 - i0, src_[3]}, dd = {1, m, o1 - o0, dst_[3]};
            // An NHWC band is dense at an offset; a blocked one is a strided view, reordered.
            if (nhwc_src) p.src = memory::desc(dims_of(sd), f32, tag::nhwc), p.src_off = i0 * src_[3] * c;
            else p.src = full_src.submemory_desc(dims_of(sd), {0, 0, i0, 0});
            if (nhwc_dst) p.dst = memory::desc(dims_of(dd), f32, tag::nhwc), p.dst_off = o0 * dst_[3] * m;
            else p.dst = full_dst.submemory_desc(dims_of(dd), {0, 0, o0, 0});
            if (bias_arg_ >= 0) p.bias = memory::desc({m}, f32, tag::x);
            const memory::desc src(dims_of(sd), f32, as_is ? tag::nhwc : src_block_ == 16 ? tag::nChw16c : tag::any);
            const memory::desc dst(dims_of(dd), f32, as_is ? tag::nhwc : dst_block_ == 16 ? tag::nChw16c : tag::any);
            with_fast_pd(src, memory::desc(wplain.dims(), f32, tag::any), p.bias, dst, p.dst, [&](const auto& pd) {
                if (i == 0) plan.impl = std::string(pd.impl_info_str()) + " (by rows)";
                finish_conv_part(p, pd, wplain, plain, w_off);
            }, &pads);
            plan.parts.push_back(std::move(p));
        }
        forget_weight_sources();
        share_weights(plan);
        return plan;
    }

    std::string describe() const override {
        auto j = [](const std::vector<int64_t>& v) {
            std::string t;
            for (int64_t x : v) t += (t.empty() ? "" : "x") + std::to_string(x);
            return t;
        };
        return std::string(deconv_ ? "deconv" : "conv") + " src " + j(src_) + "/" + std::to_string(src_block_) +
               " dst " + j(dst_) + "/" + std::to_string(dst_block_) + " k " + j(taps_) + " s " + j(strides_) + " d " +
               j(dil_) + " g " + std::to_string(groups_) +
               (post_.ops.empty() ? "" : " post " + std::to_string(post_.ops.size()));
    }

    int fixed_plan_threads() const override { return fixed_threads_; }

    bool deconv_ = false;
    int64_t w_, groups_, src_block_, dst_block_;
    int64_t plan_threads_ = 0;  // the compile's thread count, for a conv that may run by Winograd
    int fixed_threads_ = 0;     // the thread count every call's plan is made for (0: the call's)
    std::vector<int64_t> src_, dst_, kernel_, taps_begin_, taps_, strides_, dil_, pads_b_, pads_e_;
    std::string wei_;
    const float* kiln_weights_ = nullptr;  // the Executable's constant, alive as long as it is
};

/// Matmul: out[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n]) then post-ops. Parameters:
///   a, bm, out: argument indices; bias: argument of a [N] bias (optional)
///   batch, m, k, n; a_strides=b,m,k; b_strides=b,k,n (element strides; b stride 0: B shared
///   across the batch). A constant B is reordered once into the primitive's preferred layout.
/// Split across threads (runtime/extern_split.h): the batch when it divides evenly, else rows
/// of A (M >= 16 per part), else (one row) columns of B, else as many images as there are.
class DnnlMatmul final : public DnnlKernel {
public:
    DnnlMatmul(const ExternParams& p, const std::vector<ExternArg>& args) {
        src_arg_ = p.integer("a");
        bm_ = p.integer("bm");
        dst_arg_ = p.integer("out");
        bias_arg_ = p.integer_or("bias", -1);
        batch_ = p.integer("batch");
        m_ = p.integer("m");
        k_ = p.integer("k");
        n_ = p.integer("n");
        as_ = p.ints("a_strides");
        bs_ = p.ints("b_strides");
        post_ = parse_post_ops(p);
        KILN_CHECK(as_.size() == 3 && bs_.size() == 3, kInvalidModel) << "dnnl_matmul: strides need 3 entries";
        KILN_CHECK(bm_ >= 0 && bm_ < static_cast<int64_t>(args.size()), kInvalidModel) << "dnnl_matmul: bad argument index";
        const_b_ = static_cast<const float*>(args[bm_].constant);
        if (!const_b_) w_arg_ = bm_;
        packed_nb_ = p.integer_or("b_packed", 0);
        KILN_CHECK(!packed_nb_ || (const_b_ && batch_ == 1), kInvalidModel) << "dnnl_matmul: a packed B must be a constant";
        sgemm_ = sgemm_applies();
    }

    /// A 2-D product of two activations (a training step's gradients) without bias or post-ops
    /// runs as oneDNN's sgemm: 2.6's brgemm matmul ran BERT's N = 3072 gradients with a plain
    /// [K, N] B at 47-56 GFLOP/s on one Xeon thread (sgemm 148-160; why, inside oneDNN, not
    /// traced; elsewhere sgemm was even or 5-15% ahead). KILN_MATMUL_SGEMM=0 keeps the primitive.
    /// The sgemm path makes no primitives (nor their weight buffers).
    void prepare(int threads) override {
        if (!sgemm_) DnnlKernel::prepare(threads);
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        if (!sgemm_) return DnnlKernel::run(args, env, threads);
        const MatmulSplit split = dnnl_matmul_split(1, m_, n_, std::max(1, threads));
        const auto* a = static_cast<const float*>(args[src_arg_]);
        const auto* b = static_cast<const float*>(args[bm_]);
        auto* c = static_cast<float*>(args[dst_arg_]);
        Status st = run_extern_parts(env, split.parts, [&](int64_t i) {
            int64_t m0 = 0, mm = m_, n0 = 0, nn = n_;
            if (split.by == MatmulSplit::kRows) part_range(m_, 8, split.parts, i, m0, mm);
            if (split.by == MatmulSplit::kCols) part_range(n_, 16, split.parts, i, n0, nn);
            omp_set_num_threads(1);  // this part is one of Kiln's threads
            const dnnl_status_t r = dnnl_sgemm(ta_, tb_, mm, nn, k_, 1.0f, a + m0 * as_[1], lda_, b + n0 * bs_[2], ldb_,
                                               0.0f, c + m0 * n_ + n0, n_);
            if (r != dnnl_success) return Status(ErrorKind::kInternal, "oneDNN sgemm failed: status " + std::to_string(r));
            return Status::ok_status();
        });
        if (st.ok() && env.stop && *env.stop) return kernel_stopped_status();
        return st;
    }

    /// Every argument the parameters name is a float32 buffer holding every element the strides
    /// reach (REVIEW.md 8: a forged artifact's parameters must not read or write out of bounds).
    void check_buffers(const std::vector<ExternArg>& args) const {
        KILN_CHECK(batch_ >= 1 && m_ >= 1 && k_ >= 1 && n_ >= 1 && packed_nb_ >= 0, kInvalidModel)
            << "dnnl_matmul: sizes " << describe() << " must be positive";
        for (int64_t s : as_) KILN_CHECK(s >= 0, kInvalidModel) << "dnnl_matmul: negative A stride " << s;
        for (int64_t s : bs_) KILN_CHECK(s >= 0, kInvalidModel) << "dnnl_matmul: negative B stride " << s;
        auto numel = [&](int64_t arg, const char* what) { return float_arg_numel(args, arg, "dnnl_matmul", what); };
        const int64_t a_reach = as_[0] * (batch_ - 1) + as_[1] * (m_ - 1) + as_[2] * (k_ - 1) + 1;
        const int64_t b_reach = packed_nb_ ? (n_ + packed_nb_ - 1) / packed_nb_ * k_ * packed_nb_
                                           : bs_[0] * (batch_ - 1) + bs_[1] * (k_ - 1) + bs_[2] * (n_ - 1) + 1;
        const int64_t out = batch_ * m_ * n_;
        KILN_CHECK(numel(src_arg_, "A") >= a_reach && numel(bm_, "B") >= b_reach && numel(dst_arg_, "output") >= out &&
                       (bias_arg_ < 0 || numel(bias_arg_, "bias") == n_),
                   kInvalidModel)
            << "dnnl_matmul: buffer sizes do not match " << describe() << " (A reaches " << a_reach
            << " elements, B " << b_reach << ", the output needs " << out << ")";
        std::vector<int64_t> operands;
        if (post_.sum_arg >= 0) operands.push_back(post_.sum_arg);
        for (const auto& b : post_.binary) operands.push_back(b.second);
        for (int64_t arg : operands)
            KILN_CHECK(numel(arg, "post-op") >= out, kInvalidModel)
                << "dnnl_matmul: a post-op operand holds fewer elements than the output's " << out;
    }

private:
    Plan make_plan(int threads) override {
        const MatmulSplit split = dnnl_matmul_split(batch_, m_, n_, threads);
        const int64_t parts = split.parts;
        const int64_t bshared = bs_[0] == 0;
        // Kiln's packed B [N/nb, K, nb] (KilnMatMulPackedB) unpacked to plain [K, N].
        std::vector<float> unpacked;
        const float* b_plain = const_b_;
        if (packed_nb_) {
            unpacked.resize(static_cast<size_t>(k_ * n_));
            for (int64_t kk = 0; kk < k_; ++kk)
                for (int64_t j = 0; j < n_; ++j)
                    unpacked[kk * n_ + j] = const_b_[((j / packed_nb_) * k_ + kk) * packed_nb_ + j % packed_nb_];
            b_plain = unpacked.data();
        }
        Plan plan;
        for (int64_t i = 0; i < parts; ++i) {
            int64_t b0 = 0, bb = batch_, m0 = 0, mm = m_, n0 = 0, nn = n_;
            if (split.by == MatmulSplit::kBatch) part_range(batch_, 1, parts, i, b0, bb);
            if (split.by == MatmulSplit::kRows) part_range(m_, 8, parts, i, m0, mm);
            if (split.by == MatmulSplit::kCols) part_range(n_, 16, parts, i, n0, nn);
            Part p;
            const int64_t bbatch = bshared ? 1 : bb;
            p.src = memory::desc({bb, mm, k_}, memory::data_type::f32, memory::dims{as_[0], as_[1], as_[2]});
            p.dst = memory::desc({bb, mm, nn}, memory::data_type::f32, memory::dims{mm * n_, n_, 1});
            p.src_off = b0 * as_[0] + m0 * as_[1];
            p.dst_off = b0 * m_ * n_ + m0 * n_ + n0;
            p.bias_off = n0;
            if (bias_arg_ >= 0) p.bias = memory::desc({1, 1, nn}, memory::data_type::f32, tag::abc);
            memory::desc b_strided({bbatch, k_, nn}, memory::data_type::f32,
                                   memory::dims{bshared ? k_ * n_ : bs_[0], bs_[1], bs_[2]});
            const int64_t b_off = b0 * bs_[0] + n0 * bs_[2];
            memory::desc b_want = const_b_ ? memory::desc({bbatch, k_, nn}, memory::data_type::f32, tag::any) : b_strided;
            dnnl::matmul::desc d = bias_arg_ >= 0 ? dnnl::matmul::desc(p.src, b_want, p.bias, p.dst)
                                                  : dnnl::matmul::desc(p.src, b_want, p.dst);
            dnnl::primitive_attr attr = post_attr(p.dst);
            dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
            if (i == 0) plan.impl = pd.impl_info_str();
            if (const_b_) {
                p.weights = reorder_weights(pd.weights_desc(), b_strided,
                                            [&] { return static_cast<const void*>(b_plain + b_off); }, const_b_, b_off,
                                            "matmul:" + std::to_string(packed_nb_) + ":" + std::to_string(k_) + "x" +
                                                std::to_string(n_) + ":" + std::to_string(bs_[0]) + "," +
                                                std::to_string(bs_[1]) + "," + std::to_string(bs_[2]));
            } else {
                runtime_weights(p, pd.weights_desc(), b_strided, b_off);
            }
            p.prim = dnnl::matmul(pd);
            finish_part(p, pd);
            plan.parts.push_back(std::move(p));
        }
        forget_weight_sources();
        return plan;
    }

    std::string describe() const override {
        return "matmul " + std::to_string(batch_) + "x" + std::to_string(m_) + "x" + std::to_string(k_) + "x" +
               std::to_string(n_);
    }

    /// Part i of `parts` of [0, total): [lo, lo + len), lo a multiple of `align`, the last part
    /// taking the remainder.
    static void part_range(int64_t total, int64_t align, int64_t parts, int64_t i, int64_t& lo, int64_t& len) {
        const int64_t units = total / align;
        lo = align * (units * i / parts);
        len = (i + 1 == parts ? total : align * (units * (i + 1) / parts)) - lo;
    }

    /// Sets ta_, tb_, lda_, ldb_ when A and B are row- or column-major matrices sgemm can read.
    bool sgemm_applies() {
        if (const char* v = std::getenv("KILN_MATMUL_SGEMM"); v && std::string(v) == "0") return false;
        if (const_b_ || batch_ != 1 || bias_arg_ >= 0 || !post_.ops.empty()) return false;
        // A (m, k) at m * as_[1] + k * as_[2]; a single row or column's other stride is free.
        if (as_[2] == 1 && (m_ == 1 || as_[1] >= k_)) ta_ = 'N', lda_ = m_ == 1 ? k_ : as_[1];
        else if (as_[1] == 1 && (k_ == 1 || as_[2] >= m_)) ta_ = 'T', lda_ = k_ == 1 ? m_ : as_[2];
        else return false;
        if (bs_[2] == 1 && (k_ == 1 || bs_[1] >= n_)) tb_ = 'N', ldb_ = k_ == 1 ? n_ : bs_[1];
        else if (bs_[1] == 1 && (n_ == 1 || bs_[2] >= k_)) tb_ = 'T', ldb_ = n_ == 1 ? k_ : bs_[2];
        else return false;
        return true;
    }

    int64_t bm_, batch_, m_, k_, n_;
    bool sgemm_ = false;  // run() calls dnnl_sgemm (sgemm_applies)
    char ta_ = 'N', tb_ = 'N';
    int64_t lda_ = 0, ldb_ = 0;
    std::vector<int64_t> as_, bs_;
    const float* const_b_ = nullptr;  // the Executable's constant B (nullptr: an activation)
    int64_t packed_nb_ = 0;           // B is Kiln's packed [N/nb, K, nb] (b_strides then describe [K, N])
};

template <typename K>
std::unique_ptr<ExternKernel> make(const char* what, const ExternParams& p, const std::vector<ExternArg>& args) {
    try {
        return std::make_unique<K>(p, args);
    } catch (const dnnl::error& e) {
        KILN_CHECK(false, kUnsupported) << what << ": oneDNN rejected the parameters: " << e.what();
    }
    return nullptr;
}

}  // namespace

size_t dnnl_weight_copy_bytes() { return WeightCopies::global().bytes(); }

std::unique_ptr<ExternKernel> make_dnnl_conv(const ExternParams& p, const std::vector<ExternArg>& args) {
    if (dnnl_deconv_is_shuffle(p, args)) return make_dnnl_deconv_shuffle(p, args);
    std::unique_ptr<ExternKernel> k = make<DnnlConv>("dnnl_conv", p, args);
    static_cast<DnnlConv*>(k.get())->check_buffers(args);
    return k;
}

std::string dnnl_conv_implementation(const ExternParams& p) {
    try {
        // Parsing needs the weights argument; a constant stands in for it (never read).
        static const float kNoWeights = 0;
        const int64_t w = p.integer("w");
        KILN_CHECK(w >= 0 && w < 64, kInvalidModel) << "dnnl_conv: bad weights argument " << w;
        std::vector<ExternArg> args(static_cast<size_t>(w) + 1);
        args.back().constant = &kNoWeights;
        omp_set_num_threads(1);
        return DnnlConv(p, args).implementation();
    } catch (const dnnl::error&) {
        return "";
    } catch (const Error&) {
        return "";
    }
}

std::unique_ptr<ExternKernel> make_dnnl_matmul(const ExternParams& p, const std::vector<ExternArg>& args) {
    std::unique_ptr<ExternKernel> k = make<DnnlMatmul>("dnnl_matmul", p, args);
    static_cast<DnnlMatmul*>(k.get())->check_buffers(args);
    return k;
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
