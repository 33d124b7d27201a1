// oneDNN convolution and matmul as extern kernels.
//
// A primitive is created lazily on the first run with a given thread count (oneDNN's OpenMP
// runtime sizes its work split at creation, so a primitive runs with the count it was made for)
// and kept; constant weights are unpacked from Kiln's layout to plain oihw / [K, N] and reordered
// once into the layout the primitive prefers (`format_tag::any`). Activations stay in Kiln's
// buffers: blocked NCHW{c} is oneDNN's nChw{c}c, plain tensors are plain. Post-ops (the fused
// epilogue) are oneDNN eltwise and binary post-ops.
#if KILN_HAVE_DNNL
#include "runtime/dnnl_kernels.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <oneapi/dnnl/dnnl.hpp>

#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& cpu_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

float to_float(const std::string& s) { return std::strtof(s.c_str(), nullptr); }

/// One post-op of the `post` parameter: `relu`, `clip:lo:hi`, `linear:a:b` (a*x+b), `sigmoid`,
/// `tanh`, `exp`, `gelu_erf`, `gelu_tanh`, `leaky:alpha`, `add:ARG`, `mul:ARG` (a tensor of
/// the output's shape and layout, argument ARG).
struct PostOp {
    std::string kind;
    std::vector<std::string> fields;
};

std::vector<PostOp> parse_post_ops(const ExternParams& p) {
    std::vector<PostOp> out;
    for (const std::string& item : p.list("post")) {
        PostOp op;
        size_t start = 0;
        std::vector<std::string> parts;
        for (size_t i = 0; i <= item.size(); ++i)
            if (i == item.size() || item[i] == ':') {
                parts.push_back(item.substr(start, i - start));
                start = i + 1;
            }
        op.kind = parts[0];
        op.fields.assign(parts.begin() + 1, parts.end());
        out.push_back(std::move(op));
    }
    return out;
}

/// Appends the post-ops to `ops`; binary ones record (post-op index, argument) in `binary`.
void build_post_ops(const std::vector<PostOp>& posts, const memory::desc& dst, dnnl::post_ops& ops,
                    std::vector<std::pair<int, int>>& binary) {
    using alg = dnnl::algorithm;
    for (const PostOp& p : posts) {
        auto f = [&](size_t i) {
            KILN_CHECK(i < p.fields.size(), kInvalidModel) << "dnnl post-op '" << p.kind << "' lacks a parameter";
            return to_float(p.fields[i]);
        };
        if (p.kind == "relu") ops.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f);
        else if (p.kind == "leaky") ops.append_eltwise(1.f, alg::eltwise_relu, f(0), 0.f);
        else if (p.kind == "clip") ops.append_eltwise(1.f, alg::eltwise_clip, f(0), f(1));
        else if (p.kind == "linear") ops.append_eltwise(1.f, alg::eltwise_linear, f(0), f(1));
        else if (p.kind == "sigmoid") ops.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f);
        else if (p.kind == "tanh") ops.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f);
        else if (p.kind == "exp") ops.append_eltwise(1.f, alg::eltwise_exp, 0.f, 0.f);
        else if (p.kind == "gelu_erf") ops.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f);
        else if (p.kind == "gelu_tanh") ops.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f);
        else if (p.kind == "add" || p.kind == "mul") {
            binary.emplace_back(ops.len(), static_cast<int>(f(0)));
            ops.append_binary(p.kind == "add" ? alg::binary_add : alg::binary_mul, dst);
        } else {
            KILN_CHECK(false, kInvalidModel) << "unknown dnnl post-op '" << p.kind << "'";
        }
    }
}

/// What every primitive keeps per thread count.
struct Prepared {
    dnnl::primitive prim;
    memory weights;  // reordered constant weights (empty: the argument's own buffer)
    std::string impl;
    /// A plain NCHW activation the primitive wants blocked: reordered into `src_tmp` before
    /// the primitive / out of `dst_tmp` after it (empty: the primitive uses Kiln's buffer).
    memory src_tmp, dst_tmp;
};

/// Shared machinery: the lazily created primitive per thread count, post-op arguments, running.
class DnnlKernel : public ExternKernel {
public:
    Status run(void* const* args, int threads) override {
        try {
            if (threads < 1) threads = 1;
            omp_set_num_threads(threads);
            Prepared& p = prepared(threads);
            std::unordered_map<int, memory> m = bind(args, p);
            dnnl::stream s(cpu_engine());
            if (p.src_tmp) {
                memory user(user_src_desc_, cpu_engine(), args[src_arg_]);
                dnnl::reorder(user, p.src_tmp).execute(s, user, p.src_tmp);
                m[DNNL_ARG_SRC] = p.src_tmp;
            }
            if (p.dst_tmp) m[DNNL_ARG_DST] = p.dst_tmp;
            p.prim.execute(s, m);
            if (p.dst_tmp) {
                memory user(user_dst_desc_, cpu_engine(), args[dst_arg_]);
                dnnl::reorder(p.dst_tmp, user).execute(s, p.dst_tmp, user);
            }
            s.wait();
            return Status::ok_status();
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }
    std::string implementation() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return by_threads_.empty() ? "" : by_threads_.begin()->second.impl;
    }

protected:
    virtual Prepared create() = 0;
    /// The execute() arguments for one run.
    virtual std::unordered_map<int, memory> bind(void* const* args, const Prepared& p) = 0;

    void bind_post_ops(void* const* args, std::unordered_map<int, memory>& m) {
        for (const auto& [index, arg] : binary_)
            m[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = memory(post_src_desc_, cpu_engine(), args[arg]);
    }
    size_t binary_count() const { return binary_.size(); }
    dnnl::primitive_attr post_attr(const memory::desc& dst) {
        dnnl::post_ops ops;
        binary_.clear();
        build_post_ops(posts_, dst, ops, binary_);
        post_src_desc_ = dst;
        dnnl::primitive_attr attr;
        attr.set_post_ops(ops);
        return attr;
    }
    /// Constant weights in layout `want`: the copy made for an earlier thread count when it has
    /// that layout, else a reorder of it (or of the plain copy, which is then freed).
    memory weights_for(const memory::desc& want, const memory::desc& plain_desc, std::vector<float>& plain) {
        if (weights_ && weights_.get_desc() == want) return weights_;
        memory src = weights_ ? weights_ : memory(plain_desc, cpu_engine(), plain.data());
        memory dst(want, cpu_engine());
        dnnl::stream s(cpu_engine());
        dnnl::reorder(src, dst).execute(s, src, dst);
        s.wait();
        weights_ = dst;
        std::vector<float>().swap(plain);
        return dst;
    }
    std::vector<PostOp> posts_;
    memory::desc user_src_desc_, user_dst_desc_;  // Kiln's layouts of the src/dst arguments
    int64_t src_arg_ = -1, dst_arg_ = -1;

private:
    memory weights_;
    Prepared& prepared(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_threads_.find(threads);
        if (it == by_threads_.end()) it = by_threads_.emplace(threads, create()).first;
        return it->second;
    }
    mutable std::mutex mu_;
    std::map<int, Prepared> by_threads_;
    std::vector<std::pair<int, int>> binary_;
    memory::desc post_src_desc_;
};

memory::dims dims_of(const std::vector<int64_t>& v) { return memory::dims(v.begin(), v.end()); }

tag blocked_tag(int64_t block) {
    KILN_CHECK(block == 0 || block == 8 || block == 16, kInvalidModel) << "dnnl: unsupported channel block " << block;
    return block == 16 ? tag::nChw16c : block == 8 ? tag::nChw8c : tag::nchw;
}

/// Convolution (2-D). Parameters:
///   x, w, y: argument indices of the input, weights and output; b: bias argument (optional)
///   src=N,C,H,W  dst=N,M,OH,OW  kernel=KH,KW  groups=G
///   src_block / dst_block: 0 (plain NCHW) or the c of NCHW{c}
///   wei=oihw | blocked:ci:co ([M/co, C/ci, KH, KW, ci, co]) | depthwise:c ([C/c, KH, KW, c])
///   strides, dilations (ONNX convention: 1 = dense), pads_begin, pads_end; post (see PostOp)
class DnnlConv final : public DnnlKernel {
public:
    DnnlConv(const ExternParams& p, const std::vector<ExternArg>& args) {
        x_ = p.integer("x");
        w_ = p.integer("w");
        y_ = p.integer("y");
        b_ = p.integer_or("b", -1);
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
        posts_ = parse_post_ops(p);
        KILN_CHECK(src_.size() == 4 && dst_.size() == 4 && kernel_.size() == 2, kInvalidModel)
            << "dnnl_conv: only 2-D convolutions";
        KILN_CHECK(w_ < static_cast<int64_t>(args.size()) && args[w_].constant, kInvalidModel)
            << "dnnl_conv: the weights must be a constant";
        plain_weights_ = unpack_weights(p.str("wei"), static_cast<const float*>(args[w_].constant));
    }

private:
    /// Kiln's packed weights -> [G, M/G, C/G, KH, KW] (plain goihw; oihw when G == 1).
    std::vector<float> unpack_weights(const std::string& layout, const float* w) const {
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

    Prepared create() override {
        const int64_t m = dst_[1], c = src_[1], g = groups_;
        // Activations not in nChw16c (plain NCHW, or NCHW8c for channel counts like 24): let
        // oneDNN pick (its fast kernels read nChw16c, padding the channels; the first conv's few
        // input channels it reads plain) and reorder at the edges.
        memory::desc src_user(dims_of(src_), memory::data_type::f32, blocked_tag(src_block_));
        memory::desc dst_user(dims_of(dst_), memory::data_type::f32, blocked_tag(dst_block_));
        const bool src_free = src_block_ != 16 && c % 8 == 0, dst_free = dst_block_ != 16;
        memory::desc src = src_free ? memory::desc(dims_of(src_), memory::data_type::f32, tag::any) : src_user;
        memory::desc dst = dst_free ? memory::desc(dims_of(dst_), memory::data_type::f32, tag::any) : dst_user;
        memory::dims wdims = g == 1 ? memory::dims{m, c, kernel_[0], kernel_[1]}
                                    : memory::dims{g, m / g, c / g, kernel_[0], kernel_[1]};
        memory::desc wany(wdims, memory::data_type::f32, tag::any);
        memory::desc wplain(wdims, memory::data_type::f32, g == 1 ? tag::oihw : tag::goihw);
        memory::desc bias = b_ >= 0 ? memory::desc({m}, memory::data_type::f32, tag::x) : memory::desc();
        memory::dims dil = {dil_[0] - 1, dil_[1] - 1};
        dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          src, wany, bias, dst, dims_of(strides_), dil, dims_of(pads_b_),
                                          dims_of(pads_e_));
        dnnl::primitive_attr attr = post_attr(dst_user);
        dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
        Prepared p;
        p.impl = pd.impl_info_str();
        p.weights = weights_for(pd.weights_desc(), wplain, plain_weights_);
        p.prim = dnnl::convolution_forward(pd);
        if (pd.src_desc() != src_user) p.src_tmp = memory(pd.src_desc(), cpu_engine());
        if (pd.dst_desc() != dst_user) p.dst_tmp = memory(pd.dst_desc(), cpu_engine());
        KILN_CHECK(!p.dst_tmp || binary_count() == 0, kUnsupported)
            << "dnnl_conv: a residual post-op needs the output in oneDNN's layout";
        user_src_desc_ = src_desc_ = src_user;
        user_dst_desc_ = dst_desc_ = dst_user;
        src_arg_ = x_;
        dst_arg_ = y_;
        bias_desc_ = bias;
        return p;
    }

    std::unordered_map<int, memory> bind(void* const* args, const Prepared& p) override {
        std::unordered_map<int, memory> m = {{DNNL_ARG_SRC, memory(src_desc_, cpu_engine(), args[x_])},
                                             {DNNL_ARG_WEIGHTS, p.weights},
                                             {DNNL_ARG_DST, memory(dst_desc_, cpu_engine(), args[y_])}};
        if (b_ >= 0) m[DNNL_ARG_BIAS] = memory(bias_desc_, cpu_engine(), args[b_]);
        bind_post_ops(args, m);
        return m;
    }

    int64_t x_, w_, y_, b_, groups_, src_block_, dst_block_;
    std::vector<int64_t> src_, dst_, kernel_, strides_, dil_, pads_b_, pads_e_;
    std::vector<float> plain_weights_;
    memory::desc src_desc_, dst_desc_, bias_desc_;
};

/// Matmul: out[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n]) then post-ops. Parameters:
///   a, bm, out: argument indices; bias: argument of a [N] bias (optional)
///   batch, m, k, n; a_strides=b,m,k; b_strides=b,k,n (element strides; b stride 0: B shared
///   across the batch). A constant B is reordered once into the primitive's preferred layout.
class DnnlMatmul final : public DnnlKernel {
public:
    DnnlMatmul(const ExternParams& p, const std::vector<ExternArg>& args) {
        a_ = p.integer("a");
        bm_ = p.integer("bm");
        out_ = p.integer("out");
        bias_ = p.integer_or("bias", -1);
        batch_ = p.integer("batch");
        m_ = p.integer("m");
        k_ = p.integer("k");
        n_ = p.integer("n");
        as_ = p.ints("a_strides");
        bs_ = p.ints("b_strides");
        posts_ = parse_post_ops(p);
        KILN_CHECK(as_.size() == 3 && bs_.size() == 3, kInvalidModel) << "dnnl_matmul: strides need 3 entries";
        KILN_CHECK(bm_ < static_cast<int64_t>(args.size()), kInvalidModel) << "dnnl_matmul: bad argument index";
        const_b_ = args[bm_].constant != nullptr;
        if (const_b_) {  // copy B plain [batchB, K, N] out of its strides
            const int64_t bb = bs_[0] == 0 ? 1 : batch_;
            const float* w = static_cast<const float*>(args[bm_].constant);
            plain_b_.resize(static_cast<size_t>(bb * k_ * n_));
            for (int64_t b = 0; b < bb; ++b)
                for (int64_t kk = 0; kk < k_; ++kk)
                    for (int64_t nn = 0; nn < n_; ++nn)
                        plain_b_[(b * k_ + kk) * n_ + nn] = w[b * bs_[0] + kk * bs_[1] + nn * bs_[2]];
        }
    }

private:
    Prepared create() override {
        const int64_t bb = bs_[0] == 0 ? 1 : batch_;
        memory::desc a({batch_, m_, k_}, memory::data_type::f32, memory::dims{as_[0], as_[1], as_[2]});
        memory::desc b_strided({bb, k_, n_}, memory::data_type::f32,
                               memory::dims{bs_[0] == 0 ? k_ * n_ : bs_[0], bs_[1], bs_[2]});
        memory::desc b_plain({bb, k_, n_}, memory::data_type::f32, tag::abc);
        memory::desc dst({batch_, m_, n_}, memory::data_type::f32, tag::abc);
        memory::desc bias = bias_ >= 0 ? memory::desc({1, 1, n_}, memory::data_type::f32, tag::abc) : memory::desc();
        memory::desc b_want = const_b_ ? memory::desc({bb, k_, n_}, memory::data_type::f32, tag::any) : b_strided;
        dnnl::matmul::desc d = bias_ >= 0 ? dnnl::matmul::desc(a, b_want, bias, dst) : dnnl::matmul::desc(a, b_want, dst);
        dnnl::primitive_attr attr = post_attr(dst);
        dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
        Prepared p;
        p.impl = pd.impl_info_str();
        if (const_b_) p.weights = weights_for(pd.weights_desc(), b_plain, plain_b_);
        p.prim = dnnl::matmul(pd);
        a_desc_ = a;
        b_desc_ = b_strided;
        dst_desc_ = dst;
        bias_desc_ = bias;
        return p;
    }

    std::unordered_map<int, memory> bind(void* const* args, const Prepared& p) override {
        std::unordered_map<int, memory> m = {{DNNL_ARG_SRC, memory(a_desc_, cpu_engine(), args[a_])},
                                             {DNNL_ARG_DST, memory(dst_desc_, cpu_engine(), args[out_])}};
        m[DNNL_ARG_WEIGHTS] = !const_b_ ? memory(b_desc_, cpu_engine(), args[bm_]) : p.weights;
        if (bias_ >= 0) m[DNNL_ARG_BIAS] = memory(bias_desc_, cpu_engine(), args[bias_]);
        bind_post_ops(args, m);
        return m;
    }

    int64_t a_, bm_, out_, bias_, batch_, m_, k_, n_;
    std::vector<int64_t> as_, bs_;
    std::vector<float> plain_b_;
    bool const_b_ = false;
    memory::desc a_desc_, b_desc_, dst_desc_, bias_desc_;
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

std::unique_ptr<ExternKernel> make_dnnl_conv(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make<DnnlConv>("dnnl_conv", p, args);
}

std::unique_ptr<ExternKernel> make_dnnl_matmul(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make<DnnlMatmul>("dnnl_matmul", p, args);
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
