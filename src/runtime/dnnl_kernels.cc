// oneDNN convolution and matmul as extern kernels.
//
// oneDNN runs single-threaded (its OpenMP team is never started): a step is split into one part
// per intra-op thread (images, channel blocks, matrix rows or columns), each part a primitive of
// its own, and the parts run on Kiln's pool, so `--threads N` is exact and no second runtime's
// threads spin beside the pool. Parts are made on the first run with a given thread count and
// kept; constant weights are unpacked from Kiln's layout to plain oihw / [K, N] and reordered
// once into the layout the primitive prefers (`format_tag::any`). Activations stay in Kiln's
// buffers: blocked NCHW{c} is oneDNN's nChw{c}c, plain tensors are plain. Post-ops (the fused
// epilogue) are oneDNN eltwise, sum (the first residual add) and binary post-ops.
#if KILN_HAVE_DNNL
#include "runtime/dnnl_kernels.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <mutex>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& cpu_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

/// oneDNN's copies of constant weights in its layouts, shared by the kernels of the process that
/// reorder the same constant: a session compiling several shape specializations makes a kernel
/// per specialization, over one constant storage (compiler/constant_pool.h), and its weights are
/// held once. Keyed by the constant's address, the element offset of the slice, how Kiln's
/// layout was unpacked, and oneDNN's layout. An entry lives while a kernel holds it; every such
/// kernel's Executable holds the constant, so the address is not reused meanwhile.
class WeightCopies {
public:
    static WeightCopies& global() {
        static WeightCopies* copies = new WeightCopies();  // never destroyed: kernels may outlive statics
        return *copies;
    }
    /// The copy of (constant, offset, unpack) in layout `want`, made by `make` when none is held.
    std::shared_ptr<memory> get(const void* constant, int64_t offset, const std::string& unpack,
                                const memory::desc& want, const std::function<memory()>& make) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Entry>& list = entries_[Key{constant, offset, unpack}];
        for (auto it = list.begin(); it != list.end();) {
            std::shared_ptr<memory> held = it->copy.lock();
            if (!held) {
                it = list.erase(it);
                continue;
            }
            if (it->want == want) return held;
            ++it;
        }
        auto copy = std::make_shared<memory>(make());
        list.push_back({want, copy});
        return copy;
    }

    size_t bytes() {
        std::lock_guard<std::mutex> lock(mu_);
        size_t n = 0;
        for (const auto& [key, list] : entries_)
            for (const Entry& e : list)
                if (std::shared_ptr<memory> held = e.copy.lock()) n += held->get_desc().get_size();
        return n;
    }

private:
    using Key = std::tuple<const void*, int64_t, std::string>;
    struct Entry {
        memory::desc want;
        std::weak_ptr<memory> copy;
    };
    std::mutex mu_;
    std::map<Key, std::vector<Entry>> entries_;
};

/// The `post` parameter: `relu`, `clip:lo:hi`, `linear:a:b` (a*x+b), `sigmoid`, `tanh`, `exp`,
/// `gelu_erf`, `gelu_tanh`, `leaky:alpha`, `add:ARG`, `mul:ARG` (a tensor of the output's shape
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
        else KILN_CHECK(false, kInvalidModel) << "unknown dnnl post-op '" << p.kind << "'";
    }
    return ops;
}

/// Buffers of one layout lent to one call at a time: the activations a part reorders into
/// oneDNN's layout, its primitive's scratchpad. Concurrent runs of a session execute the same kernel at once, and each call
/// needs its own; a single caller reuses one buffer on every call.
class TempPool {
public:
    explicit TempPool(memory::desc desc) : desc_(std::move(desc)) {}
    const memory::desc& desc() const { return desc_; }
    memory take() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!free_.empty()) {
                memory m = free_.back();
                free_.pop_back();
                return m;
            }
        }
        return memory(desc_, cpu_engine());
    }
    void give(memory m) {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(std::move(m));
    }

private:
    memory::desc desc_;
    std::mutex mu_;
    std::vector<memory> free_;
};

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
    std::shared_ptr<TempPool> scratchpad;  // the primitive's scratchpad (null: it needs none)
    dnnl::reorder src_reorder, dst_reorder, sum_reorder;
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
            Plan* chosen = &plan_for(std::max(1, threads));
            // A preemptible call (env.stop) takes finer parts where the step splits that far: a
            // stop then waits for a fraction of a thread's share instead of all of it. Parts
            // split images, channel blocks or rows, so the result is the same.
            for (int k = kPreemptPartsPerThread; env.stop && k >= 2; --k) {
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
            struct Ctx {
                DnnlKernel* self;
                Plan* plan;
                void* const* args;
                const memory* weights;
                std::mutex mu;
                Status first;
            } ctx{this, &plan, args, shared_w ? &shared_w.get() : nullptr, {}, Status::ok_status()};
            env.parallel_for(env.pool, static_cast<int64_t>(plan.parts.size()),
                             [](int64_t b, int64_t e, void* c) {
                                 auto* x = static_cast<Ctx*>(c);
                                 for (int64_t i = b; i < e; ++i) {
                                     Status st = x->self->run_part(x->plan->parts[i], x->args, x->weights);
                                     if (!st.ok()) {
                                         std::lock_guard<std::mutex> lock(x->mu);
                                         if (x->first.ok()) x->first = st;
                                     }
                                 }
                             },
                             &ctx);
            // A preemptible loop that stopped left parts undone (run_control.h).
            if (ctx.first.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return ctx.first;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

protected:
    /// Splits the step into at most `parts` parts and makes their primitives.
    virtual Plan make_plan(int parts) = 0;
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
    /// Finishes part `p` for primitive descriptor `pd` (any primitive kind): temporaries and
    /// reorders where oneDNN chose another activation layout than Kiln's.
    template <typename PD>
    void finish_part(Part& p, const PD& pd) {
        if (pd.scratchpad_desc().get_size() > 0) p.scratchpad = std::make_shared<TempPool>(pd.scratchpad_desc());
        if (pd.src_desc() != p.src) {
            p.src_tmp = std::make_shared<TempPool>(pd.src_desc());
            p.src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.src, cpu_engine(), pd.src_desc()));
        }
        if (pd.dst_desc() != p.dst) {
            KILN_CHECK(post_.binary.empty(), kUnsupported) << "dnnl: a binary post-op needs the output in oneDNN's layout";
            p.dst_tmp = std::make_shared<TempPool>(pd.dst_desc());
            p.dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), pd.dst_desc(), cpu_engine(), p.dst));
            // The sum post-op's residual goes into oneDNN's layout of dst first.
            if (post_.sum_arg >= 0)
                p.sum_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p.dst, cpu_engine(), pd.dst_desc()));
        }
    }
    /// Constant weights reordered from `plain` into `want` (shared by parts that want the same,
    /// and by other kernels reordering the same slice of the same constant: WeightCopies).
    /// `constant`, `offset` and `unpack` say where `plain` came from.
    memory reorder_weights(const memory::desc& want, const memory::desc& plain_desc, const void* plain,
                           const void* constant, int64_t offset, const std::string& unpack) {
        for (const memory& m : weights_cache_)
            if (m.get_desc() == want && plain == weights_src_) return m;
        std::shared_ptr<memory> copy = WeightCopies::global().get(constant, offset, unpack, want, [&] {
            memory src(plain_desc, cpu_engine(), const_cast<void*>(plain));
            memory dst(want, cpu_engine());
            dnnl::stream s(cpu_engine());
            dnnl::reorder(src, dst).execute(s, src, dst);
            s.wait();
            return dst;
        });
        weights_held_.push_back(copy);
        weights_src_ = plain;
        weights_cache_.push_back(*copy);
        return *copy;
    }
    void forget_weight_sources() { weights_src_ = nullptr; weights_cache_.clear(); }
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
            TempLease src_tmp(p.src_tmp), dst_tmp(p.dst_tmp), scratchpad(p.scratchpad);
            if (scratchpad) m[DNNL_ARG_SCRATCHPAD] = scratchpad.get();
            memory src(p.src, cpu_engine(), at(args[src_arg_], p.src_off));
            if (src_tmp) {
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
            if (dst_tmp) p.dst_reorder.execute(s, dst_tmp.get(), dst);
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
    const void* weights_src_ = nullptr;
    std::vector<memory> weights_cache_;
    std::vector<std::shared_ptr<memory>> weights_held_;  // this kernel's share of WeightCopies
};

memory::dims dims_of(const std::vector<int64_t>& v) { return memory::dims(v.begin(), v.end()); }

/// oneDNN's tag for Kiln's layout of `channels` channels in blocks of `block` (0: plain NCHW);
/// one block of all channels is NHWC.
tag blocked_tag(int64_t block, int64_t channels) {
    if (block == 16) return tag::nChw16c;
    if (block == 8) return tag::nChw8c;
    if (block == 0) return tag::nchw;
    KILN_CHECK(block == channels, kInvalidModel) << "dnnl: unsupported channel block " << block << " of " << channels;
    return tag::nhwc;
}

/// Convolution (2-D). Parameters:
///   x, w, y: argument indices of the input, weights and output; b: bias argument (optional)
///   src=N,C,H,W  dst=N,M,OH,OW  kernel=KH,KW  groups=G
///   src_block / dst_block: 0 (plain NCHW) or the c of NCHW{c}
///   wei=oihw | blocked:ci:co ([M/co, C/ci, KH, KW, ci, co]) | depthwise:c ([C/c, KH, KW, c])
///   strides, dilations (ONNX convention: 1 = dense), pads_begin, pads_end; post (see PostOp)
/// Split across threads: whole images when N divides evenly, else (one image) output channels
/// in blocks of 16 (depthwise: input channels with them).
class DnnlConv final : public DnnlKernel {
public:
    DnnlConv(const ExternParams& p, const std::vector<ExternArg>& args) {
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
        post_ = parse_post_ops(p);
        KILN_CHECK(src_.size() == 4 && dst_.size() == 4 && kernel_.size() == 2, kInvalidModel)
            << "dnnl_conv: only 2-D convolutions";
        KILN_CHECK(w_ < static_cast<int64_t>(args.size()), kInvalidModel) << "dnnl_conv: bad weights argument";
        kiln_weights_ = static_cast<const float*>(args[w_].constant);
        // Weights computed at run time (a training step's parameters, the flipped weights of a
        // data gradient) come in plain oihw and are reordered on every call.
        if (!kiln_weights_) w_arg_ = w_;
        KILN_CHECK(kiln_weights_ || wei_ == "oihw", kInvalidModel)
            << "dnnl_conv: weights in layout '" << wei_ << "' must be a constant";
    }

private:
    /// Kiln's packed weights -> [G, M/G, C/G, KH, KW] (plain goihw; oihw when G == 1).
    std::vector<float> unpack_weights() const {
        const float* w = kiln_weights_;
        const std::string& layout = wei_;
        const int64_t m = dst_[1], c = src_[1], kh = kernel_[0], kw = kernel_[1], g = groups_;
        const int64_t cg = c / g;
        std::vector<float> out(static_cast<size_t>(m * cg * kh * kw));
        if (layout == "oihw") {
            std::memcpy(out.data(), w, out.size() * sizeof(float));
        } else if (layout.rfind("blocked:", 0) == 0) {
            KILN_CHECK(g == 1, kInvalidModel) << "dnnl_conv: blocked weights need groups=1";
            int64_t ci = std::strtoll(layout.c_str() + 8, nullptr, 10);
            int64_t co = std::strtoll(layout.c_str() + layout.rfind(':') + 1, nullptr, 10);
            KILN_CHECK(ci > 0 && co > 0 && c % ci == 0 && m % co == 0, kInvalidModel) << "dnnl_conv: bad weights layout " << layout;
            for (int64_t o = 0; o < m; ++o)
                for (int64_t i = 0; i < c; ++i)
                    for (int64_t y = 0; y < kh; ++y)
                        for (int64_t x = 0; x < kw; ++x) {
                            int64_t src = ((((o / co) * (c / ci) + i / ci) * kh + y) * kw + x) * ci * co + (i % ci) * co + o % co;
                            out[((o * c + i) * kh + y) * kw + x] = w[src];
                        }
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

    Plan make_plan(int threads) override {
        const int64_t n = src_[0], c = src_[1], m = dst_[1], g = groups_;
        const bool depthwise = g > 1 && g == c && g == m;
        // Split: whole images, else channel blocks of one image (groups == 1 or depthwise).
        int64_t parts = 1;
        bool by_batch = false;
        if (threads > 1 && n % threads == 0) {
            parts = threads;
            by_batch = true;
        } else if (threads > 1 && n == 1 && (g == 1 || depthwise) && m % 16 == 0 && m / 16 >= threads) {
            parts = threads;
        }
        std::vector<float> plain = kiln_weights_ ? unpack_weights() : std::vector<float>{};
        const int64_t per_out = (c / g) * kernel_[0] * kernel_[1];
        const int64_t blocks = m / 16;
        Plan plan;
        for (int64_t i = 0; i < parts; ++i) {
            int64_t n0 = 0, nn = n, m0 = 0, mm = m;
            if (by_batch) {
                n0 = i * (n / parts);
                nn = n / parts;
            } else if (parts > 1) {
                m0 = 16 * (blocks * i / parts);
                mm = 16 * (blocks * (i + 1) / parts) - m0;
            }
            const int64_t c0 = depthwise ? m0 : 0, cc = depthwise ? mm : c, gg = depthwise ? mm : g;
            Part p;
            std::vector<int64_t> sd = {nn, cc, src_[2], src_[3]}, dd = {nn, mm, dst_[2], dst_[3]};
            p.src = memory::desc(dims_of(sd), memory::data_type::f32, blocked_tag(src_block_, cc));
            p.dst = memory::desc(dims_of(dd), memory::data_type::f32, blocked_tag(dst_block_, mm));
            p.src_off = n0 * c * src_[2] * src_[3] + c0 * src_[2] * src_[3];
            p.dst_off = n0 * m * dst_[2] * dst_[3] + m0 * dst_[2] * dst_[3];
            p.bias_off = m0;
            if (bias_arg_ >= 0) p.bias = memory::desc({mm}, memory::data_type::f32, tag::x);
            // Activations not in nChw16c (plain NCHW, NCHW8c for channel counts like 24, NHWC for
            // the stem's 3 channels): let oneDNN pick (its fast kernels read nChw16c, padding the
            // channels; the first conv's few input channels it reads plain) and reorder at the
            // edges. Given a mixed layout it falls back to a reference kernel (ResNet-50's stem
            // from NHWC: 450 ms instead of 3).
            const bool src_free = src_block_ != 16, dst_free = dst_block_ != 16;
            memory::desc src = src_free ? memory::desc(dims_of(sd), memory::data_type::f32, tag::any) : p.src;
            memory::desc dst = dst_free ? memory::desc(dims_of(dd), memory::data_type::f32, tag::any) : p.dst;
            memory::dims wdims = gg == 1 ? memory::dims{mm, cc, kernel_[0], kernel_[1]}
                                         : memory::dims{gg, mm / gg, cc / gg, kernel_[0], kernel_[1]};
            memory::desc wany(wdims, memory::data_type::f32, tag::any);
            memory::desc wplain(wdims, memory::data_type::f32, gg == 1 ? tag::oihw : tag::goihw);
            memory::dims dil = {dil_[0] - 1, dil_[1] - 1};
            dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src, wany, p.bias, dst, dims_of(strides_), dil, dims_of(pads_b_),
                                              dims_of(pads_e_));
            dnnl::primitive_attr attr = post_attr(p.dst);
            dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
            if (i == 0) plan.impl = pd.impl_info_str();
            if (kiln_weights_)
                p.weights = reorder_weights(pd.weights_desc(), wplain, plain.data() + m0 * per_out, kiln_weights_,
                                            m0 * per_out, "conv:" + wei_ + ":" + std::to_string(groups_));
            else runtime_weights(p, pd.weights_desc(), wplain, m0 * per_out);
            p.prim = dnnl::convolution_forward(pd);
            finish_part(p, pd);
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
        return "conv src " + j(src_) + "/" + std::to_string(src_block_) + " dst " + j(dst_) + "/" +
               std::to_string(dst_block_) + " k " + j(kernel_) + " s " + j(strides_) + " g " + std::to_string(groups_) +
               (post_.ops.empty() ? "" : " post " + std::to_string(post_.ops.size()));
    }

    int64_t w_, groups_, src_block_, dst_block_;
    std::vector<int64_t> src_, dst_, kernel_, strides_, dil_, pads_b_, pads_e_;
    std::string wei_;
    const float* kiln_weights_ = nullptr;  // the Executable's constant, alive as long as it is
};

/// Matmul: out[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n]) then post-ops. Parameters:
///   a, bm, out: argument indices; bias: argument of a [N] bias (optional)
///   batch, m, k, n; a_strides=b,m,k; b_strides=b,k,n (element strides; b stride 0: B shared
///   across the batch). A constant B is reordered once into the primitive's preferred layout.
/// Split across threads: the batch when it divides evenly, else rows of A (M >= 16 per part),
/// else (one row) columns of B.
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
        KILN_CHECK(bm_ < static_cast<int64_t>(args.size()), kInvalidModel) << "dnnl_matmul: bad argument index";
        const_b_ = static_cast<const float*>(args[bm_].constant);
        if (!const_b_) w_arg_ = bm_;
        packed_nb_ = p.integer_or("b_packed", 0);
        KILN_CHECK(!packed_nb_ || (const_b_ && batch_ == 1), kInvalidModel) << "dnnl_matmul: a packed B must be a constant";
    }

private:
    Plan make_plan(int threads) override {
        enum { kNone, kBatch, kRows, kCols } split = kNone;
        if (threads > 1 && batch_ % threads == 0) split = kBatch;
        else if (threads > 1 && batch_ == 1 && m_ >= 16 * threads) split = kRows;
        else if (threads > 1 && batch_ == 1 && m_ == 1 && n_ >= 64 * threads) split = kCols;
        const int64_t parts = split == kNone ? 1 : threads;
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
            auto range = [&](int64_t total, int64_t align, int64_t& lo, int64_t& len) {
                const int64_t units = total / align;
                lo = align * (units * i / parts);
                len = (i + 1 == parts ? total : align * (units * (i + 1) / parts)) - lo;
            };
            if (split == kBatch) range(batch_, 1, b0, bb);
            if (split == kRows) range(m_, 8, m0, mm);
            if (split == kCols) range(n_, 16, n0, nn);
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
                p.weights = reorder_weights(pd.weights_desc(), b_strided, b_plain + b_off, const_b_, b_off,
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

    int64_t bm_, batch_, m_, k_, n_;
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
    return make<DnnlConv>("dnnl_conv", p, args);
}

std::unique_ptr<ExternKernel> make_dnnl_matmul(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make<DnnlMatmul>("dnnl_matmul", p, args);
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
