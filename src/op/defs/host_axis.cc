// Axis-wise copies of host tensors (see host_axis.h). A tensor is viewed as [outer, dim, inner]
// around the axis; slices and concatenations copy contiguous runs of dim * inner elements.
#include "op/defs/host_axis.h"

#include <cstring>

#include "support/error.h"

namespace kiln::op {

namespace {

int64_t prod(const Shape& s, size_t begin, size_t end) {
    int64_t p = 1;
    for (size_t i = begin; i < end; ++i) p *= s[i];
    return p;
}

}  // namespace

void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
    KILN_ICHECK(src.dtype() == dst.dtype()) << "copy_elems between different dtypes";
    if (n <= 0) return;
    if (src.dtype() == DType::kString) {
        const std::string* s = src.data_as<std::string>() + src_off;
        std::string* d = dst.data_as<std::string>() + dst_off;
        for (int64_t i = 0; i < n; ++i) d[i] = s[i];
        return;
    }
    const size_t es = dtype_size(src.dtype());
    std::memcpy(static_cast<char*>(dst.data()) + static_cast<size_t>(dst_off) * es,
                static_cast<const char*>(src.data()) + static_cast<size_t>(src_off) * es, static_cast<size_t>(n) * es);
}

Tensor slice_axis(const Tensor& t, int axis, int64_t start, int64_t len, bool keep_axis) {
    const Shape& s = t.shape();
    KILN_ICHECK(axis >= 0 && axis < static_cast<int>(s.size())) << "slice_axis: axis out of range";
    KILN_ICHECK(start >= 0 && len >= 0 && start + len <= s[axis]) << "slice_axis: range out of bounds";
    const int64_t outer = prod(s, 0, axis), inner = prod(s, axis + 1, s.size());
    Shape os = s;
    os[axis] = len;
    if (!keep_axis) {
        KILN_ICHECK(len == 1) << "slice_axis: dropping an axis of length " << len;
        os.erase(os.begin() + axis);
    }
    Tensor out(t.dtype(), os);
    for (int64_t o = 0; o < outer; ++o)
        copy_elems(t, (o * s[axis] + start) * inner, out, o * len * inner, len * inner);
    return out;
}

Tensor concat_axis(const std::vector<Tensor>& items, int axis, const std::string& who) {
    KILN_ICHECK(!items.empty()) << "concat_axis of no tensors";
    const Shape& s0 = items[0].shape();
    KILN_ICHECK(axis >= 0 && axis < static_cast<int>(s0.size())) << "concat_axis: axis out of range";
    int64_t total = 0;
    for (size_t k = 0; k < items.size(); ++k) {
        const Shape& s = items[k].shape();
        KILN_CHECK(items[k].dtype() == items[0].dtype(), kInvalidArgument)
            << who << ": tensor " << k << " has dtype " << dtype_name(items[k].dtype()) << ", expected "
            << dtype_name(items[0].dtype());
        bool ok = s.size() == s0.size();
        for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int>(d) == axis || s[d] == s0[d];
        KILN_CHECK(ok, kInvalidArgument) << who << ": tensor " << k << " has shape " << shape_str(s)
                                         << ", expected " << shape_str(s0) << " off axis " << axis;
        total += s[axis];
    }
    Shape os = s0;
    os[axis] = total;
    Tensor out(items[0].dtype(), os);
    const int64_t outer = prod(s0, 0, axis), inner = prod(s0, axis + 1, s0.size());
    int64_t off = 0;
    for (const Tensor& t : items) {
        const int64_t run = t.shape()[axis] * inner;
        for (int64_t o = 0; o < outer; ++o) copy_elems(t, o * run, out, o * total * inner + off, run);
        off += run;
    }
    return out;
}

Tensor stack_axis(const std::vector<Tensor>& items, int axis, const std::string& who) {
    KILN_ICHECK(!items.empty()) << "stack_axis of no tensors";
    const Shape& s0 = items[0].shape();
    KILN_ICHECK(axis >= 0 && axis <= static_cast<int>(s0.size())) << "stack_axis: axis out of range";
    for (size_t k = 0; k < items.size(); ++k)
        KILN_CHECK(items[k].shape() == s0 && items[k].dtype() == items[0].dtype(), kInvalidArgument)
            << who << ": tensor " << k << " is " << dtype_name(items[k].dtype()) << shape_str(items[k].shape())
            << ", expected " << dtype_name(items[0].dtype()) << shape_str(s0) << " like tensor 0";
    Shape unsq = s0;
    unsq.insert(unsq.begin() + axis, 1);
    std::vector<Tensor> views;
    views.reserve(items.size());
    for (const Tensor& t : items) views.push_back(t.reshaped(unsq));
    return concat_axis(views, axis, who);
}

}  // namespace kiln::op
