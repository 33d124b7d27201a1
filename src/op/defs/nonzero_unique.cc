// NonZero (9/13) and Unique (11): host kernels (op/host.h) — their output shapes depend on the
// data.
//
// NonZero: the coordinates of the non-zero elements of X in row-major order, as int64 [rank, nnz]
// (numpy.nonzero stacked); a rank-0 X gives [0, nnz] (the ONNX spec, unlike numpy). "Non-zero"
// is x != 0 for numbers (NaN counts), true for bool and non-empty for strings.
//
// Unique: numpy.unique(X, return_index, return_inverse, return_counts, axis) with ONNX's
// `sorted` attribute. The slices to compare are X's elements (no axis: X flattened) or X's
// sub-tensors along `axis` (compared lexicographically over their row-major elements, the
// order numpy gets from moveaxis(X, axis, 0).reshape(A, -1)). A stable sort of the slice ids
// makes each run of equal slices start at its first occurrence, which gives `indices`; runs
// become the unique values, `inverse_indices` maps every slice to its run and `counts` is the run
// length. sorted=0 reorders the runs by first occurrence. Floats order NaN after every number;
// without an axis all NaNs are one value (numpy's equal_nan=True), with an axis a slice holding
// a NaN equals no other slice (numpy compares the structured rows with !=). -0.0 equals 0.0, and
// the value kept is the first occurrence's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const std::vector<DType>& nonzero_types() {
    static const std::vector<DType> types = [] {
        std::vector<DType> t = all_types();
        t.push_back(DType::kString);
        return t;
    }();
    return types;
}

bool element_nonzero(const Tensor& x, int64_t i) {
    if (x.dtype() == DType::kString) return !x.data_as<std::string>()[i].empty();
    if (dtype_is_float(x.dtype())) return x.get_f64(i) != 0.0;  // NaN is non-zero
    if (x.dtype() == DType::kUInt64) return x.data_as<uint64_t>()[i] != 0;
    return x.get_i64(i) != 0;
}

OpDef nonzero_op() {
    OpDef d;
    d.name = "NonZero";
    d.onnx_versions = {9, 13};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, nonzero_types());
        return std::vector<ir::TensorType>{{DType::kInt64, {int64_t{x.rank()}, ir::Dim::sym("?")}}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = a.tensor(0);
        check_dtype(a.node, "X", x.dtype(), nonzero_types());
        const int rank = static_cast<int>(x.shape().size());
        std::vector<int64_t> hits;
        for (int64_t i = 0; i < x.numel(); ++i)
            if (element_nonzero(x, i)) hits.push_back(i);
        const int64_t nnz = static_cast<int64_t>(hits.size());
        Tensor y(DType::kInt64, {int64_t{rank}, nnz});
        int64_t* out = y.data_as<int64_t>();
        for (int64_t k = 0; k < nnz; ++k) {
            int64_t flat = hits[static_cast<size_t>(k)];
            for (int d = rank - 1; d >= 0; --d) {
                const int64_t extent = x.shape()[static_cast<size_t>(d)];
                out[d * nnz + k] = flat % extent;
                flat /= extent;
            }
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

// ---------------------------------------------------------------------------------------------
// Unique

// X's elements as comparable keys: one vector per key kind, the others empty.
struct Keys {
    enum class Kind { kFloat, kSigned, kUnsigned, kString } kind = Kind::kFloat;
    std::vector<double> f;
    std::vector<int64_t> s;
    std::vector<uint64_t> u;
    std::vector<std::string> str;
};

Keys make_keys(const Tensor& x) {
    Keys k;
    const int64_t n = x.numel();
    if (x.dtype() == DType::kString) {
        k.kind = Keys::Kind::kString;
        k.str.assign(x.data_as<std::string>(), x.data_as<std::string>() + n);
    } else if (dtype_is_float(x.dtype())) {
        k.kind = Keys::Kind::kFloat;
        k.f.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) k.f[static_cast<size_t>(i)] = x.get_f64(i);
    } else if (x.dtype() == DType::kUInt64) {
        k.kind = Keys::Kind::kUnsigned;
        k.u.assign(x.data_as<uint64_t>(), x.data_as<uint64_t>() + n);
    } else {
        k.kind = Keys::Kind::kSigned;
        k.s.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) k.s[static_cast<size_t>(i)] = x.get_i64(i);
    }
    return k;
}

// Three-way order of elements i and j (NaN after every number, NaNs equal to each other).
int compare_elems(const Keys& k, int64_t i, int64_t j) {
    const auto ui = static_cast<size_t>(i), uj = static_cast<size_t>(j);
    switch (k.kind) {
        case Keys::Kind::kFloat: {
            const double a = k.f[ui], b = k.f[uj];
            const bool na = std::isnan(a), nb = std::isnan(b);
            if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
            return a < b ? -1 : (b < a ? 1 : 0);
        }
        case Keys::Kind::kSigned:
            return k.s[ui] < k.s[uj] ? -1 : (k.s[uj] < k.s[ui] ? 1 : 0);
        case Keys::Kind::kUnsigned:
            return k.u[ui] < k.u[uj] ? -1 : (k.u[uj] < k.u[ui] ? 1 : 0);
        case Keys::Kind::kString:
            return k.str[ui].compare(k.str[uj]) < 0 ? -1 : (k.str[ui] == k.str[uj] ? 0 : 1);
    }
    return 0;
}

bool is_nan_elem(const Keys& k, int64_t i) {
    return k.kind == Keys::Kind::kFloat && std::isnan(k.f[static_cast<size_t>(i)]);
}

// X viewed as `count` slices of `outer * inner` elements: slice s, position p = o * inner + e is
// element (o, s, e) of X reshaped to [outer, count, inner].
struct SliceView {
    int64_t outer = 1, count = 1, inner = 1;
    int64_t elem(int64_t s, int64_t p) const {
        return ((p / inner) * count + s) * inner + p % inner;
    }
    int64_t size() const { return outer * inner; }
};

int compare_slices(const Keys& k, const SliceView& v, int64_t a, int64_t b) {
    for (int64_t p = 0; p < v.size(); ++p) {
        int c = compare_elems(k, v.elem(a, p), v.elem(b, p));
        if (c != 0) return c;
    }
    return 0;
}

// Equal as numpy merges them: without an axis NaN equals NaN; with one a NaN equals nothing.
bool same_slice(const Keys& k, const SliceView& v, int64_t a, int64_t b, bool by_axis) {
    for (int64_t p = 0; p < v.size(); ++p) {
        const int64_t ea = v.elem(a, p), eb = v.elem(b, p);
        if (compare_elems(k, ea, eb) != 0) return false;
        if (by_axis && is_nan_elem(k, ea)) return false;
    }
    return true;
}

void copy_element(const Tensor& src, int64_t i, Tensor& dst, int64_t j) {
    if (src.dtype() == DType::kString) {
        dst.data_as<std::string>()[j] = src.data_as<std::string>()[i];
        return;
    }
    const size_t sz = dtype_size(src.dtype());
    std::memcpy(static_cast<char*>(dst.data()) + j * sz,
                static_cast<const char*>(src.data()) + i * sz, sz);
}

Tensor int64_vector(const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return t;
}

std::vector<Datum> unique_host(const HostArgs& a) {
    const ir::Node& n = a.node;
    const Tensor& x = a.tensor(0);
    check_dtype(n, "X", x.dtype(), nonzero_types());
    const int rank = static_cast<int>(x.shape().size());
    const bool by_axis = n.has_attr("axis");
    const int64_t sorted = n.attr_int("sorted", 1);
    KILN_CHECK(sorted == 0 || sorted == 1, kInvalidArgument)
        << n.describe() << ": attribute sorted must be 0 or 1, got " << sorted;
    SliceView view;
    int axis = 0;
    if (by_axis) {
        const int64_t attr_axis = n.attr_int("axis", 0);
        KILN_CHECK(rank >= 1 && attr_axis >= -rank && attr_axis < rank, kInvalidArgument)
            << n.describe() << ": attribute axis=" << attr_axis << " is out of range for X of rank "
            << rank;
        axis = static_cast<int>(attr_axis < 0 ? attr_axis + rank : attr_axis);
        view.count = x.shape()[static_cast<size_t>(axis)];
        for (int d = 0; d < axis; ++d) view.outer *= x.shape()[static_cast<size_t>(d)];
        for (int d = axis + 1; d < rank; ++d) view.inner *= x.shape()[static_cast<size_t>(d)];
    } else {
        view.count = x.numel();
    }
    const Keys keys = make_keys(x);

    std::vector<int64_t> order(static_cast<size_t>(view.count));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t p, int64_t q) { return compare_slices(keys, view, p, q) < 0; });

    // Runs of equal slices in sorted order: first slice (= first occurrence) and length.
    std::vector<int64_t> first, counts;
    std::vector<int64_t> run_of(static_cast<size_t>(view.count));
    for (size_t i = 0; i < order.size(); ++i) {
        if (i == 0 || !same_slice(keys, view, order[i - 1], order[i], by_axis)) {
            first.push_back(order[i]);
            counts.push_back(0);
        }
        counts.back() += 1;
        run_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
    }
    const auto num_unique = static_cast<int64_t>(first.size());

    // Position of each run in the output: sorted order, or the order of first occurrence.
    std::vector<int64_t> rank_of_run(first.size());
    std::iota(rank_of_run.begin(), rank_of_run.end(), int64_t{0});
    if (sorted == 0) {
        std::vector<int64_t> runs(first.size());
        std::iota(runs.begin(), runs.end(), int64_t{0});
        std::sort(runs.begin(), runs.end(),
                  [&](int64_t p, int64_t q) { return first[p] < first[q]; });
        std::vector<int64_t> first2(first.size()), counts2(first.size());
        for (size_t r = 0; r < runs.size(); ++r) {
            rank_of_run[static_cast<size_t>(runs[r])] = static_cast<int64_t>(r);
            first2[r] = first[static_cast<size_t>(runs[r])];
            counts2[r] = counts[static_cast<size_t>(runs[r])];
        }
        first.swap(first2);
        counts.swap(counts2);
    }
    std::vector<int64_t> inverse(static_cast<size_t>(view.count));
    for (size_t s = 0; s < inverse.size(); ++s)
        inverse[s] = rank_of_run[static_cast<size_t>(run_of[s])];

    Shape y_shape{num_unique};
    if (by_axis) {
        y_shape = x.shape();
        y_shape[static_cast<size_t>(axis)] = num_unique;
    }
    Tensor y(x.dtype(), y_shape);
    SliceView out_view = view;
    out_view.count = num_unique;
    for (int64_t u = 0; u < num_unique; ++u)
        for (int64_t p = 0; p < view.size(); ++p)
            copy_element(x, view.elem(first[static_cast<size_t>(u)], p), y, out_view.elem(u, p));

    std::vector<Datum> outs{std::move(y), int64_vector(first), int64_vector(inverse),
                            int64_vector(counts)};
    outs.resize(n.num_outputs());
    return outs;
}

OpDef unique_op() {
    OpDef d;
    d.name = "Unique";
    d.onnx_versions = {11};
    d.min_outputs = 1;
    d.max_outputs = 4;
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt},
               {"sorted", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, nonzero_types());
        std::vector<ir::Dim> y_shape{ir::Dim::sym("?")};
        ir::Dim num_slices = ir::Dim::sym("?");
        if (n.has_attr("axis")) {
            const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
            y_shape = x.shape;
            y_shape[static_cast<size_t>(axis)] = ir::Dim::sym("?");
            num_slices = x.shape[static_cast<size_t>(axis)];
        } else if (x.is_static()) {
            num_slices = shape_numel(x.static_shape());
        }
        std::vector<ir::TensorType> outs{{x.dtype, y_shape},
                                         {DType::kInt64, {ir::Dim::sym("?")}},
                                         {DType::kInt64, {num_slices}},
                                         {DType::kInt64, {ir::Dim::sym("?")}}};
        outs.resize(n.num_outputs());
        return outs;
    };
    d.host = unique_host;
    return d;
}

}  // namespace

void register_nonzero_unique_ops(OpRegistry& r) {
    r.add(nonzero_op());
    r.add(unique_op());
}

}  // namespace kiln::op
