// oneDNN convolution backward (data and weights) as an extern kernel; dnnl_conv_backward.h
// says what it computes and how the step is split.
#if KILN_HAVE_DNNL
#include "runtime/extern_parts.h"
#include "runtime/dnnl_conv_backward.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/conv_backward_choice.h"
#include "runtime/conv_strided_1x1.h"
#include "runtime/conv_weight_gemm.h"
#include "runtime/dnnl_engine.h"
#include "runtime/dnnl_scratch_pool.h"
#include "runtime/dnnl_temp_pool.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

using dnnl::memory;

memory::dims dims_of(const std::vector<int64_t>& v) { return memory::dims(v.begin(), v.end()); }

/// A row-major descriptor of `dims` inside a dense buffer of `full` dims (default: dims).
memory::desc plain_desc(const memory::dims& dims, memory::dims full = {}) {
    if (full.empty()) full = dims;
    memory::dims strides(full.size(), 1);
    for (size_t i = full.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * full[i];
    return memory::desc(dims, memory::data_type::f32, strides);
}

/// One of a primitive's three tensors in a part: Kiln's plain slice at element offset `off` of
/// argument `arg`, and oneDNN's layout of it when that differs (a buffer and a reorder).
struct Side {
    int arg = 0;
    int64_t off = 0;
    memory::desc plain;
    std::shared_ptr<TempPool> tmp;  // null: the primitive reads / writes Kiln's buffer
    dnnl::reorder reorder;            // plain -> oneDNN's (an input) or oneDNN's -> plain (the output)
};

struct Part {
    dnnl::primitive prim;
    Side in0, in1, out;  // data: diff_dst, weights -> diff_src; weights: src, diff_dst -> diff_weights
    memory::desc scratchpad;  // size 0: none; lent from ScratchPool per call
    std::shared_ptr<TempPool> partial;  // weights, parts after the first: their plain dW
    int64_t images = 0;
};

struct Plan {
    std::vector<Part> parts;
    std::string impl;
};

class DnnlConvBackward final : public ExternKernel {
public:
    DnnlConvBackward(const ExternParams& p, const std::vector<ExternArg>& args) {
        const std::string& kind = p.str("kind");
        KILN_CHECK(kind == "data" || kind == "weights", kInvalidModel) << "dnnl_conv_bwd: kind must be data or weights, got '" << kind << "'";
        data_ = kind == "data";
        src_ = p.ints("src"), wei_ = p.ints("wei"), dst_ = p.ints("dst");
        groups_ = p.integer("groups");
        strides_ = p.ints("strides"), dilates_ = p.ints("dilates"), pad_l_ = p.ints("pad_l"), pad_r_ = p.ints("pad_r");
        crop_ = p.has("crop") ? p.ints("crop") : std::vector<int64_t>(src_.begin() + 2, src_.end());
        const size_t rank = src_.size();
        KILN_CHECK(rank >= 3 && rank <= 5 && wei_.size() == rank && dst_.size() == rank && groups_ >= 1 &&
                       strides_.size() == rank - 2 && dilates_.size() == rank - 2 && pad_l_.size() == rank - 2 &&
                       pad_r_.size() == rank - 2 && crop_.size() == rank - 2 && wei_[0] % groups_ == 0 && wei_[1] * groups_ == src_[1] &&
                       dst_[1] == wei_[0] && src_[0] == dst_[0] && src_[0] >= 1,
                   kInvalidModel)
            << "dnnl_conv_bwd: inconsistent parameters";
        for (size_t i = 0; i < crop_.size(); ++i) {
            KILN_CHECK(crop_[i] >= 1 && crop_[i] <= src_[2 + i], kInvalidModel) << "dnnl_conv_bwd: bad crop";
            cropped_ |= crop_[i] < src_[2 + i];
        }
        args_[0] = static_cast<int>(p.integer(data_ ? "dy_arg" : "x_arg"));
        args_[1] = static_cast<int>(p.integer(data_ ? "w_arg" : "dy_arg"));
        args_[2] = static_cast<int>(p.integer("out_arg"));
        const Shape want[3] = {data_ ? dst_ : src_, data_ ? wei_ : dst_, data_ ? src_ : wei_};
        for (int i = 0; i < 3; ++i)
            KILN_CHECK(args_[i] >= 0 && args_[i] < static_cast<int>(args.size()) &&
                           args[args_[i]].dtype == DType::kFloat32 && args[args_[i]].shape == want[i],
                       kInvalidModel)
                << "dnnl_conv_bwd: argument " << args_[i] << " is not a float32 buffer of shape " << shape_str(want[i]);
        ConvBwdGeometry geo{data_, src_[1], wei_[0], groups_, std::vector<int64_t>(wei_.begin() + 2, wei_.end()),
                            strides_, dilates_, std::vector<int64_t>(dst_.begin() + 2, dst_.end())};
        choice_ = choose_conv_backward(geo);
        if (groups_ == 1 && rank == 4) {
            const ConvWeightGemmShape s{src_[0], src_[1], src_[2], src_[3], crop_[0], crop_[1], wei_[0], wei_[2],
                                        wei_[3], dst_[2], dst_[3], strides_[0], strides_[1], dilates_[0] + 1,
                                        dilates_[1] + 1, pad_l_[0], pad_l_[1]};
            if (conv_strided_1x1_applies(s, data_)) strided_1x1_ = std::make_unique<ConvStrided1x1>(s);
            else if (!data_ && conv_weight_gemm_preferred(s)) gemm_ = std::make_unique<ConvWeightGemm>(s);
        }
    }

    std::string implementation() {
        if (strided_1x1_) return "gemm:strided-1x1";
        return gemm_ ? "gemm:im2col+sgemm" : plan_for(1).impl;
    }

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override {
        if (strided_1x1_) {
            const auto* a = static_cast<const float*>(args[args_[0]]);
            const auto* b = static_cast<const float*>(args[args_[1]]);
            auto* out = static_cast<float*>(args[args_[2]]);
            return data_ ? strided_1x1_->run_data(a, b, out, env, std::max(1, threads))
                         : strided_1x1_->run_weights(a, b, out, env, std::max(1, threads));
        }
        if (gemm_)
            return gemm_->run(static_cast<const float*>(args[args_[0]]), static_cast<const float*>(args[args_[1]]),
                              static_cast<float*>(args[args_[2]]), env, std::max(1, threads));
        try {
            Plan& plan = plan_for(std::max(1, threads));
            std::vector<memory> partials;
            for (size_t i = 1; i < plan.parts.size() && !data_; ++i) partials.push_back(plan.parts[i].partial->take());
            // A data gradient's parts all read W in one blocked layout: reordered once here, on the
            // caller's thread, instead of once per part (ResNet-18's 512x512x3x3: 9.4 MB each).
            std::optional<memory> shared_w;
            if (data_ && plan.parts.size() > 1 && plan.parts[0].in1.tmp) {
                const Side& w = plan.parts[0].in1;
                shared_w = w.tmp->take();
                dnnl::stream st(cpu_engine());
                omp_set_num_threads(1);
                memory plain(w.plain, cpu_engine(), static_cast<float*>(args[w.arg]) + w.off);
                w.reorder.execute(st, plain, *shared_w);
                st.wait();
            }
            Status first = run_extern_parts(env, static_cast<int64_t>(plan.parts.size()), [&](int64_t i) {
                float* dst = i == 0 || data_ ? nullptr : static_cast<float*>(partials[i - 1].get_data_handle());
                return run_part(plan.parts[i], args, dst, shared_w ? &*shared_w : nullptr);
            });
            if (shared_w) plan.parts[0].in1.tmp->give(*shared_w);
            // A preemptible loop that stopped left parts (or chunks of the sum) undone (run_control.h).
            const bool stopped = env.stop && *env.stop;
            if (first.ok() && !stopped && !partials.empty()) add_partials(args, partials, env);
            for (size_t i = 0; i < partials.size(); ++i) plan.parts[i + 1].partial->give(partials[i]);
            if (first.ok() && env.stop && *env.stop) return kernel_stopped_status();
            return first;
        } catch (const Error& e) {
            return Status::from(e);
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

private:
    /// Images [n0, n0 + n) as a part: the algorithm and activation layout choose_conv_backward
    /// picked (conv_backward_choice.h), else oneDNN's direct kernel on its own layouts where it
    /// rejects that or answers with its reference kernel.
    Part make_part(int64_t n0, int64_t n) {
        std::vector<ConvBwdChoice> tries;
        for (ConvBwdChoice c : {choice_, ConvBwdChoice{choice_.winograd, ConvBwdLayout::kAny}, ConvBwdChoice{}})
            if (tries.empty() || c.winograd != tries.back().winograd || c.layout != tries.back().layout) tries.push_back(c);
        for (size_t i = 0; i + 1 < tries.size(); ++i) {
            try {
                Part part = make_part_as(n0, n, tries[i]);
                if (impl_.rfind("ref", 0) != 0) return part;
            } catch (const dnnl::error&) {
                // oneDNN has no kernel for this choice: the next one
            }
        }
        return make_part_as(n0, n, tries.back());
    }

    /// make_part with `c`'s algorithm and activation layout (weights: format any), and the
    /// reorders between Kiln's plain slices and the layouts oneDNN's primitive takes.
    Part make_part_as(int64_t n0, int64_t n, const ConvBwdChoice& c) {
        memory::dims x = dims_of(src_), y = dims_of(dst_), w = dims_of(wei_);
        x[0] = y[0] = n;
        memory::dims x_full = x;  // the buffer's; x: what the windows read
        for (size_t i = 0; i < crop_.size(); ++i) x[2 + i] = crop_[i];
        if (groups_ > 1) {  // [M, C/G, K...] is oneDNN's [G, M/G, C/G, K...]
            w[0] = wei_[0] / groups_;
            w.insert(w.begin(), groups_);
        }
        const memory::format_tag act_tag = activation_tag(c.layout);
        auto any = [](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); };
        auto act = [&](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, act_tag); };
        const memory::dims s = dims_of(strides_), d = dims_of(dilates_), pl = dims_of(pad_l_), pr = dims_of(pad_r_);
        const auto algo = c.winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
        dnnl::convolution_forward::primitive_desc fwd(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, act(x), any(w), act(y), s, d, pl, pr),
            cpu_engine());
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, per call: concurrent runs
        Part part;
        part.images = n;
        const int64_t x_off = n0 * shape_numel(src_) / src_[0], y_off = n0 * shape_numel(dst_) / dst_[0];
        memory::desc scratch;
        if (data_) {
            dnnl::convolution_backward_data::primitive_desc pd(
                dnnl::convolution_backward_data::desc(algo, act(x), any(w), act(y), s, d, pl, pr), attr, cpu_engine(), fwd);
            part.prim = dnnl::convolution_backward_data(pd);
            part.in0 = input_side(args_[0], y_off, plain_desc(y), pd.diff_dst_desc());
            part.in1 = input_side(args_[1], 0, plain_desc(w), pd.weights_desc());
            part.out = output_side(args_[2], x_off, plain_desc(x, x_full), pd.diff_src_desc());
            scratch = pd.scratchpad_desc();
            impl_ = pd.impl_info_str();
        } else {
            dnnl::convolution_backward_weights::primitive_desc pd(
                dnnl::convolution_backward_weights::desc(algo, act(x), any(w), act(y), s, d, pl, pr), attr, cpu_engine(), fwd);
            part.prim = dnnl::convolution_backward_weights(pd);
            part.in0 = input_side(args_[0], x_off, plain_desc(x, x_full), pd.src_desc());
            part.in1 = input_side(args_[1], y_off, plain_desc(y), pd.diff_dst_desc());
            part.out = output_side(args_[2], 0, plain_desc(w), pd.diff_weights_desc());
            if (n0 > 0) part.partial = std::make_shared<TempPool>(plain_desc(w));
            scratch = pd.scratchpad_desc();
            impl_ = pd.impl_info_str();
        }
        part.scratchpad = scratch;
        layout_ = layout_name(c.layout);
        return part;
    }

    static memory::format_tag activation_tag(ConvBwdLayout l) {
        switch (l) {
            case ConvBwdLayout::kNhwc: return memory::format_tag::nhwc;
            case ConvBwdLayout::kNchw: return memory::format_tag::nchw;
            case ConvBwdLayout::kNChw16c: return memory::format_tag::nChw16c;
            case ConvBwdLayout::kAny: break;
        }
        return memory::format_tag::any;
    }

    static Side input_side(int arg, int64_t off, const memory::desc& plain, const memory::desc& want) {
        Side s{arg, off, plain, nullptr, {}};
        if (want != plain) {
            s.tmp = std::make_shared<TempPool>(want);
            s.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), plain, cpu_engine(), want));
        }
        return s;
    }
    static Side output_side(int arg, int64_t off, const memory::desc& plain, const memory::desc& have) {
        Side s{arg, off, plain, nullptr, {}};
        if (have != plain) {
            s.tmp = std::make_shared<TempPool>(have);
            s.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), have, cpu_engine(), plain));
        }
        return s;
    }

    /// Runs part `p`; its output goes to `dst` when given (a weight gradient's partial sum), and
    /// it reads `in1` (W already in the primitive's layout) when given.
    Status run_part(Part& p, void* const* args, float* dst, const memory* in1) {
        try {
            omp_set_num_threads(1);
            dnnl::stream st(cpu_engine());
            std::vector<std::pair<TempPool*, memory>> leased;
            auto lease = [&](const std::shared_ptr<TempPool>& pool) {
                leased.emplace_back(pool.get(), pool->take());
                return leased.back().second;
            };
            auto bind = [&](const Side& s, void* base) {
                memory plain(s.plain, cpu_engine(), static_cast<float*>(base) + s.off);
                if (!s.tmp) return plain;
                memory m = lease(s.tmp);
                s.reorder.execute(st, plain, m);
                return m;
            };
            std::unordered_map<int, memory> m;
            m[data_ ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC] = bind(p.in0, args[p.in0.arg]);
            m[data_ ? DNNL_ARG_WEIGHTS : DNNL_ARG_DIFF_DST] = in1 ? *in1 : bind(p.in1, args[p.in1.arg]);
            memory out(p.out.plain, cpu_engine(), dst ? dst : static_cast<float*>(args[p.out.arg]) + p.out.off);
            if (data_ && cropped_)  // the rows no window reads get no gradient
                std::memset(static_cast<float*>(args[p.out.arg]) + p.out.off, 0, p.images * shape_numel(src_) / src_[0] * sizeof(float));
            memory result = p.out.tmp ? lease(p.out.tmp) : out;
            m[data_ ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DIFF_WEIGHTS] = result;
            ScratchLease scratch(p.scratchpad);
            if (scratch) m[DNNL_ARG_SCRATCHPAD] = scratch.get();
            p.prim.execute(st, m);
            if (p.out.tmp) p.out.reorder.execute(st, result, out);
            st.wait();
            for (auto& [pool, mem] : leased) pool->give(std::move(mem));
            return Status::ok_status();
        } catch (const dnnl::error& e) {
            return Status(ErrorKind::kInternal, std::string("oneDNN: ") + e.what());
        }
    }

    /// dW += the other parts' sums, in chunks on the pool (ResNet-18's 512x512x3x3: 9.4 MB).
    void add_partials(void* const* args, const std::vector<memory>& partials, const kiln_kernel_env& env) const {
        struct Add {
            float* out;
            const std::vector<memory>* partials;
            int64_t n;
        } job{static_cast<float*>(args[args_[2]]), &partials, shape_numel(wei_)};
        constexpr int64_t kChunk = 1 << 15;
        auto add = [](int64_t b, int64_t e, void* c) {
            const auto* j = static_cast<const Add*>(c);
            for (int64_t chunk = b; chunk < e; ++chunk) {
                const int64_t lo = chunk * kChunk, hi = std::min(j->n, lo + kChunk);
                for (const memory& m : *j->partials) {
                    const float* p = static_cast<const float*>(m.get_data_handle());
                    for (int64_t i = lo; i < hi; ++i) j->out[i] += p[i];
                }
            }
        };
        const int64_t chunks = (job.n + kChunk - 1) / kChunk;
        if (env.parallel_for && chunks > 1) env.parallel_for(env.pool, chunks, add, &job);
        else add(0, chunks, &job);
    }

    Plan& plan_for(int threads) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = plans_.find(threads);
        if (it != plans_.end()) return it->second;
        omp_set_num_threads(1);
        Plan plan;
        const int64_t parts = std::min<int64_t>(threads, src_[0]);
        for (int64_t i = 0; i < parts; ++i) {
            const int64_t n0 = src_[0] * i / parts, n1 = src_[0] * (i + 1) / parts;
            plan.parts.push_back(make_part(n0, n1 - n0));
        }
        plan.impl = impl_;
        if (std::getenv("KILN_DNNL_VERBOSE"))
            std::fprintf(stderr, "kiln dnnl: conv backward %s src %s wei %s, %d thread(s): %zu part(s), %s on %s\n",
                         data_ ? "data" : "weights", shape_str(src_).c_str(), shape_str(wei_).c_str(), threads,
                         plan.parts.size(), plan.impl.c_str(), layout_.c_str());
        return plans_.emplace(threads, std::move(plan)).first->second;
    }

    bool data_ = true;
    std::vector<int64_t> src_, wei_, dst_, strides_, dilates_, pad_l_, pad_r_, crop_;
    bool cropped_ = false;
    int64_t groups_ = 1;
    int args_[3] = {0, 0, 0};  // in0, in1, out
    std::string impl_, layout_;  // the last part's oneDNN implementation and activation layout asked
    ConvBwdChoice choice_;        // what make_part asks for first (conv_backward_choice.h)
    std::mutex mu_;
    std::map<int, Plan> plans_;
    std::unique_ptr<ConvWeightGemm> gemm_;  // the weight gradient as im2col + sgemm (conv_weight_gemm.h)
    std::unique_ptr<ConvStrided1x1> strided_1x1_;  // both gradients of a strided 1x1 conv (conv_strided_1x1.h)
};

}  // namespace

std::unique_ptr<ExternKernel> make_dnnl_conv_backward(const ExternParams& p, const std::vector<ExternArg>& args) {
    try {
        return std::make_unique<DnnlConvBackward>(p, args);
    } catch (const dnnl::error& e) {
        KILN_CHECK(false, kUnsupported) << "dnnl_conv_bwd: oneDNN rejected the parameters: " << e.what();
    }
    return nullptr;
}

std::string dnnl_conv_backward_implementation(const ExternParams& p) {
    check_conv_backward_switches();  // a bad switch is the user's error, not a rejected conv
    try {
        // Only the argument types are checked here: stand-ins of the shapes the parameters name.
        const bool data = p.str("kind") == "data";
        const int64_t a = p.integer(data ? "dy_arg" : "x_arg"), b = p.integer(data ? "w_arg" : "dy_arg"),
                      o = p.integer("out_arg");
        KILN_CHECK(a >= 0 && b >= 0 && o >= 0 && a < 64 && b < 64 && o < 64, kInvalidModel) << "dnnl_conv_bwd: bad arguments";
        std::vector<ExternArg> args(static_cast<size_t>(std::max({a, b, o})) + 1);
        args[a].shape = data ? p.ints("dst") : p.ints("src");
        args[b].shape = data ? p.ints("wei") : p.ints("dst");
        args[o].shape = data ? p.ints("src") : p.ints("wei");
        return DnnlConvBackward(p, args).implementation();
    } catch (const dnnl::error&) {
        return "";
    } catch (const Error&) {
        return "";
    }
}

}  // namespace kiln::runtime
#endif  // KILN_HAVE_DNNL
