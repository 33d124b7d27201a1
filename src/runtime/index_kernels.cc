// TopK, CumSum and ScatterND as runtime kernels (index_kernels.h).
#include "runtime/index_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "runtime/executable.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

/// A tensor seen as [outer, n, inner] around `axis`.
struct Lines {
    int64_t outer = 1, n = 1, inner = 1;
};

Lines lines_of(const Shape& s, int64_t axis, const char* what) {
    KILN_CHECK(axis >= 0 && axis < static_cast<int64_t>(s.size()), kInvalidModel)
        << what << ": axis " << axis << " out of range for shape " << shape_str(s);
    Lines l;
    for (int64_t d = 0; d < axis; ++d) l.outer *= s[static_cast<size_t>(d)];
    l.n = s[static_cast<size_t>(axis)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) l.inner *= s[d];
    return l;
}

const ExternArg& arg_at(const std::vector<ExternArg>& args, int64_t i, const char* what) {
    KILN_CHECK(i >= 0 && i < static_cast<int64_t>(args.size()), kInvalidModel)
        << what << ": argument " << i << " out of the step's " << args.size();
    return args[static_cast<size_t>(i)];
}

/// Calls f with a value of the C type of `t` (float, double, int32_t, int64_t).
template <typename F>
bool with_type(DType t, F&& f) {
    switch (t) {
        case DType::kFloat32: f(float{}); return true;
        case DType::kFloat64: f(double{}); return true;
        case DType::kInt32: f(int32_t{}); return true;
        case DType::kInt64: f(int64_t{}); return true;
        default: return false;
    }
}

// ---- TopK: per line, the k best (largest or smallest) in order, ties to the lower index; NaN
// ranks above every number (as numpy's and ORT's sorts place it). Lines run in parallel on the
// intra-op pool when large; small k by an insertion buffer, large k by partial_sort.
template <typename T>
class TopK final : public ExternKernel {
public:
    TopK(const ExternParams& p, const std::vector<ExternArg>& args)
        : x_(p.integer("x")), values_(p.integer("values")), indices_(p.integer("indices")), k_(p.integer("k")),
          largest_(p.integer("largest") != 0) {
        const ExternArg& x = arg_at(args, x_, "kiln_topk");
        lines_ = lines_of(x.shape, p.integer("axis"), "kiln_topk");
        KILN_CHECK(k_ >= 0 && k_ <= lines_.n, kInvalidModel) << "kiln_topk: k " << k_ << " outside [0, " << lines_.n << "]";
        Shape out = x.shape;
        out[static_cast<size_t>(p.integer("axis"))] = k_;
        KILN_CHECK(values_ >= 0 || indices_ >= 0, kInvalidModel) << "kiln_topk: neither output is computed";
        if (values_ >= 0) {  // -1: the values are not used (only the indices)
            const ExternArg& v = arg_at(args, values_, "kiln_topk");
            KILN_CHECK(v.shape == out && v.dtype == x.dtype, kInvalidModel)
                << "kiln_topk: values must be " << shape_str(out) << ", got " << shape_str(v.shape);
        }
        if (indices_ >= 0) {
            const ExternArg& i = arg_at(args, indices_, "kiln_topk");
            KILN_CHECK(i.shape == out && i.dtype == DType::kInt64, kInvalidModel)
                << "kiln_topk: indices must be int64 " << shape_str(out) << ", got " << shape_str(i.shape);
        }
    }

    Status run(void* const* args, const kiln_kernel_env& env, int) override {
        Job job{this, static_cast<const T*>(args[x_]), values_ >= 0 ? static_cast<T*>(args[values_]) : nullptr,
                indices_ >= 0 ? static_cast<int64_t*>(args[indices_]) : nullptr};
        const int64_t lines = lines_.outer * lines_.inner;
        // Lines in parallel once there is enough work for a hand-off to pay.
        if (env.parallel_for && lines > 1 && lines * lines_.n >= (1 << 14)) {
            env.parallel_for(env.pool, lines, &TopK::run_lines, &job);
            if (env.stop && *env.stop) return kernel_stopped_status();  // some lines were not run
        } else
            run_lines(0, lines, &job);
        return Status::ok_status();
    }

private:
    struct Job {
        const TopK* self;
        const T* x;
        T* vals;
        int64_t* idx;
    };
    using Entry = std::pair<T, int64_t>;  // value, position in the line

    // Whether a ranks before b: larger (smaller) first, NaN above every number, ties to the
    // lower position.
    bool beats(const Entry& a, const Entry& b) const {
        const bool na = is_nan(a.first), nb = is_nan(b.first);
        if (na || nb) return na && !nb ? largest_ : (!na && nb ? !largest_ : a.second < b.second);
        if (a.first != b.first) return largest_ ? a.first > b.first : a.first < b.first;
        return a.second < b.second;
    }

    static void run_lines(int64_t begin, int64_t end, void* ctx) {
        const Job& j = *static_cast<const Job*>(ctx);
        const TopK& t = *j.self;
        const int64_t n = t.lines_.n, in = t.lines_.inner, k = t.k_;
        std::vector<Entry> best;
        std::vector<int64_t> order;
        for (int64_t line_i = begin; line_i < end; ++line_i) {
            const int64_t o = line_i / in, c = line_i % in;
            const T* line = j.x + o * n * in + c;
            if (k <= kInsertMax) {
                // A sorted buffer of the k best so far: most elements lose to its last at one
                // comparison (O(n) for k << n; partial_sort's heap cost O(n log k) comparisons
                // through an index: 2.6x ORT on [64, 1000], k = 5).
                best.clear();
                auto offer = [&](int64_t a) {
                    const Entry e{line[a * in], a};
                    if (static_cast<int64_t>(best.size()) == k) {
                        if (!t.beats(e, best.back())) return;
                        best.pop_back();
                    }
                    best.push_back(e);
                    for (size_t q = best.size() - 1; q > 0 && t.beats(best[q], best[q - 1]); --q) std::swap(best[q], best[q - 1]);
                };
                int64_t a = 0;
                for (; a < n && static_cast<int64_t>(best.size()) < k; ++a) offer(a);
                if (k > 0 && in == 1) a = t.skip_losing_blocks(line, a, n, best, offer);
                for (; a < n && k > 0; ++a) offer(a);
            } else {
                order.resize(static_cast<size_t>(n));
                std::iota(order.begin(), order.end(), int64_t{0});
                auto by = [&](int64_t a, int64_t b) { return t.beats({line[a * in], a}, {line[b * in], b}); };
                std::partial_sort(order.begin(), order.begin() + k, order.end(), by);
                best.clear();
                for (int64_t p = 0; p < k; ++p) best.push_back({line[order[static_cast<size_t>(p)] * in], order[static_cast<size_t>(p)]});
            }
            const int64_t base = o * k * in + c;
            for (int64_t p = 0; p < k; ++p) {
                if (j.vals) j.vals[base + p * in] = best[static_cast<size_t>(p)].first;
                if (j.idx) j.idx[base + p * in] = best[static_cast<size_t>(p)].second;
            }
        }
    }

    // Up to this k the insertion buffer above; beyond it partial_sort.
    static constexpr int64_t kInsertMax = 32;

    /// The insertion buffer's scan over a contiguous float line from `a`, a block of 16 at a
    /// time: a block none of whose elements can beat the k-th best (a later element equal to it
    /// loses the tie) is skipped after one vector comparison; a block that may hold a winner
    /// goes through `offer`. Stops at a NaN threshold or the line's tail (the scalar loop takes
    /// over). Returns where it stopped. Most blocks of a long line hold no winner.
    template <typename Offer>
    int64_t skip_losing_blocks(const T* line, int64_t a, int64_t n, const std::vector<Entry>& best, Offer& offer) const {
        if constexpr (!std::is_same_v<T, float>) {
            return a;
        } else {
            constexpr int64_t kBlock = 16;
            for (; a + kBlock <= n; a += kBlock) {
                const float thr = best.back().first;
                if (std::isnan(thr)) return a;
                const float* v = line + a;
                int maybe = 0;  // some element greater (smaller) than the threshold, or NaN
                if (largest_) {
#pragma omp simd reduction(| : maybe)
                    for (int64_t j = 0; j < kBlock; ++j) maybe |= !(v[j] <= thr);
                } else {
#pragma omp simd reduction(| : maybe)
                    for (int64_t j = 0; j < kBlock; ++j) maybe |= !(v[j] >= thr);
                }
                if (maybe)
                    for (int64_t b = a; b < a + kBlock; ++b) offer(b);
            }
            return a;
        }
    }

    static bool is_nan(T v) {
        if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
        return false;
    }
    int64_t x_, values_, indices_, k_;
    bool largest_;
    Lines lines_;
};

// ---- CumSum: per line a running sum (exclusive: of the elements before; reverse: from the end).
template <typename T>
class CumSum final : public ExternKernel {
public:
    CumSum(const ExternParams& p, const std::vector<ExternArg>& args)
        : x_(p.integer("x")), y_(p.integer("y")), exclusive_(p.integer("exclusive") != 0),
          reverse_(p.integer("reverse") != 0) {
        const ExternArg& x = arg_at(args, x_, "kiln_cumsum");
        const ExternArg& y = arg_at(args, y_, "kiln_cumsum");
        KILN_CHECK(y.shape == x.shape && y.dtype == x.dtype, kInvalidModel)
            << "kiln_cumsum: output " << shape_str(y.shape) << " must match the input " << shape_str(x.shape);
        lines_ = lines_of(x.shape, p.integer("axis"), "kiln_cumsum");
    }

    Status run(void* const* args, const kiln_kernel_env&, int) override {
        const T* x = static_cast<const T*>(args[x_]);
        T* y = static_cast<T*>(args[y_]);
        const int64_t n = lines_.n, in = lines_.inner;
        std::vector<T> acc(static_cast<size_t>(in));
        for (int64_t o = 0; o < lines_.outer; ++o) {
            std::fill(acc.begin(), acc.end(), T{0});
            const T* xs = x + o * n * in;
            T* ys = y + o * n * in;
            // Rows of `inner` contiguous values, so the inner loop vectorizes.
            for (int64_t s = 0; s < n; ++s) {
                const int64_t r = reverse_ ? n - 1 - s : s;
                const T* xr = xs + r * in;
                T* yr = ys + r * in;
                if (exclusive_) {
                    for (int64_t c = 0; c < in; ++c) {
                        const T v = xr[c];
                        yr[c] = acc[static_cast<size_t>(c)];
                        acc[static_cast<size_t>(c)] += v;
                    }
                } else {
                    for (int64_t c = 0; c < in; ++c) yr[c] = acc[static_cast<size_t>(c)] += xr[c];
                }
            }
        }
        return Status::ok_status();
    }

private:
    int64_t x_, y_;
    bool exclusive_, reverse_;
    Lines lines_;
};

// ---- ScatterND: out = data, then for each index tuple (in order) the update slice written or
// reduced into out[tuple]. Negative indices count from the end of their axis.
template <typename T>
class ScatterND final : public ExternKernel {
public:
    ScatterND(const ExternParams& p, const std::vector<ExternArg>& args)
        : data_(p.integer("data")), ind_(p.integer("indices")), upd_(p.integer("updates")), out_(p.integer("out")),
          reduction_(p.str("reduction")) {
        const ExternArg& d = arg_at(args, data_, "kiln_scatternd");
        const ExternArg& i = arg_at(args, ind_, "kiln_scatternd");
        const ExternArg& u = arg_at(args, upd_, "kiln_scatternd");
        const ExternArg& o = arg_at(args, out_, "kiln_scatternd");
        KILN_CHECK(o.shape == d.shape && o.dtype == d.dtype && u.dtype == d.dtype && i.dtype == DType::kInt64 &&
                       !i.shape.empty(),
                   kInvalidModel)
            << "kiln_scatternd: arguments disagree (data " << shape_str(d.shape) << ", indices " << shape_str(i.shape)
            << ", updates " << shape_str(u.shape) << ", output " << shape_str(o.shape) << ")";
        dims_ = d.shape;
        tuple_ = i.shape.back();
        KILN_CHECK(tuple_ >= 1 && tuple_ <= static_cast<int64_t>(dims_.size()), kInvalidModel)
            << "kiln_scatternd: index tuples of " << tuple_ << " for data of rank " << dims_.size();
        count_ = shape_numel(i.shape) / tuple_;
        slice_ = 1;
        for (size_t k = static_cast<size_t>(tuple_); k < dims_.size(); ++k) slice_ *= dims_[k];
        KILN_CHECK(shape_numel(u.shape) == count_ * slice_, kInvalidModel)
            << "kiln_scatternd: updates hold " << shape_numel(u.shape) << " values, expected " << count_ * slice_;
        numel_ = shape_numel(d.shape);
        KILN_CHECK(reduction_ == "none" || reduction_ == "add" || reduction_ == "mul" || reduction_ == "max" ||
                       reduction_ == "min",
                   kInvalidModel)
            << "kiln_scatternd: unknown reduction '" << reduction_ << "'";
    }

    Status run(void* const* args, const kiln_kernel_env&, int) override {
        const T* data = static_cast<const T*>(args[data_]);
        const int64_t* ind = static_cast<const int64_t*>(args[ind_]);
        const T* upd = static_cast<const T*>(args[upd_]);
        T* out = static_cast<T*>(args[out_]);
        if (out != data) std::memcpy(out, data, static_cast<size_t>(numel_) * sizeof(T));
        for (int64_t u = 0; u < count_; ++u) {
            int64_t offset = 0;
            for (int64_t k = 0; k < tuple_; ++k) {
                const int64_t dim = dims_[static_cast<size_t>(k)];
                int64_t v = ind[u * tuple_ + k];
                if (v < 0) v += dim;
                if (v < 0 || v >= dim)
                    return Status(ErrorKind::kInvalidArgument,
                                  "ScatterND: index " + std::to_string(ind[u * tuple_ + k]) + " of update " +
                                      std::to_string(u) + " is out of range for axis " + std::to_string(k) +
                                      " of size " + std::to_string(dim));
                offset = offset * dim + v;
            }
            T* dst = out + offset * slice_;
            const T* src = upd + u * slice_;
            apply(dst, src);
        }
        return Status::ok_status();
    }

private:
    void apply(T* dst, const T* src) const {
        if (reduction_ == "none") std::memcpy(dst, src, static_cast<size_t>(slice_) * sizeof(T));
        else if (reduction_ == "add") for (int64_t j = 0; j < slice_; ++j) dst[j] += src[j];
        else if (reduction_ == "mul") for (int64_t j = 0; j < slice_; ++j) dst[j] *= src[j];
        else if (reduction_ == "max") for (int64_t j = 0; j < slice_; ++j) dst[j] = std::max(dst[j], src[j]);
        else for (int64_t j = 0; j < slice_; ++j) dst[j] = std::min(dst[j], src[j]);
    }

    int64_t data_, ind_, upd_, out_;
    std::string reduction_;
    Shape dims_;
    int64_t tuple_ = 1, count_ = 0, slice_ = 1, numel_ = 0;
};

template <template <typename> class K>
std::unique_ptr<ExternKernel> make_typed(const char* what, DType t, const ExternParams& p,
                                         const std::vector<ExternArg>& args) {
    std::unique_ptr<ExternKernel> k;
    const bool ok = with_type(t, [&](auto v) { k = std::make_unique<K<decltype(v)>>(p, args); });
    KILN_CHECK(ok, kUnsupported) << what << ": element type " << dtype_name(t) << " is not supported";
    return k;
}

}  // namespace

std::unique_ptr<ExternKernel> make_topk_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make_typed<TopK>("kiln_topk", arg_at(args, p.integer("x"), "kiln_topk").dtype, p, args);
}

std::unique_ptr<ExternKernel> make_cumsum_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make_typed<CumSum>("kiln_cumsum", arg_at(args, p.integer("x"), "kiln_cumsum").dtype, p, args);
}

std::unique_ptr<ExternKernel> make_scatternd_kernel(const ExternParams& p, const std::vector<ExternArg>& args) {
    return make_typed<ScatterND>("kiln_scatternd", arg_at(args, p.integer("data"), "kiln_scatternd").dtype, p, args);
}

}  // namespace kiln::runtime
