// ScanStack (see scan_stack.h).
#include "runtime/vm/scan_stack.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime::vm {

ScanStack::ScanStack(DType dtype, Shape slice, int64_t capacity)
    : dtype_(dtype), slice_(std::move(slice)), known_(std::none_of(slice_.begin(), slice_.end(), [](int64_t d) {
          return d < 0;
      })) {
    // Preallocated up to kMaxPreallocBytes (M may be a while loop's INT64_MAX); beyond, grown.
    constexpr size_t kMaxPreallocBytes = size_t{1} << 26;
    if (known_ && capacity > 0 && static_cast<uint64_t>(capacity) <= kMaxPreallocBytes / std::max<size_t>(1, slice_bytes()))
        reserve(capacity);
}

size_t ScanStack::slice_bytes() const { return static_cast<size_t>(shape_numel(slice_)) * dtype_size(dtype_); }

void ScanStack::reserve(int64_t slices) {
    if (slices <= capacity_) return;
    Shape s = slice_;
    s.insert(s.begin(), slices);
    Tensor grown(dtype_, s);
    if (capacity_ > 0 && buf_.nbytes()) std::memcpy(grown.data(), buf_.data(), buf_.nbytes());
    buf_ = std::move(grown);
    capacity_ = slices;
}

Tensor ScanStack::slot(int64_t i) {
    if (!known_) return Tensor();
    if (i >= capacity_) reserve(std::max<int64_t>(2 * capacity_, std::max<int64_t>(i + 1, 4)));
    return Tensor::borrow(dtype_, slice_, static_cast<char*>(buf_.data()) + static_cast<size_t>(i) * slice_bytes());
}

Status ScanStack::settle(int64_t i, const Tensor& got) {
    if (!known_) {
        slice_ = got.shape();
        known_ = true;
    }
    if (got.dtype() != dtype_ || got.shape() != slice_)
        return Status(ErrorKind::kInvalidArgument, "iteration " + std::to_string(i) + " gave " +
                                                       dtype_name(got.dtype()) + shape_str(got.shape()) +
                                                       ", earlier iterations " + dtype_name(dtype_) + shape_str(slice_));
    if (i >= capacity_) reserve(std::max<int64_t>(2 * capacity_, std::max<int64_t>(i + 1, 4)));
    char* dst = static_cast<char*>(buf_.data()) + static_cast<size_t>(i) * slice_bytes();
    if (got.data() != dst && slice_bytes()) std::memcpy(dst, got.data(), slice_bytes());
    return Status::ok_status();
}

Tensor ScanStack::finish(int64_t n, int64_t axis, bool reversed) {
    Shape slice = slice_;
    for (int64_t& d : slice) d = std::max<int64_t>(d, 0);
    Shape out_shape = slice;
    out_shape.insert(out_shape.begin() + axis, n);
    if (n > 0 && n == capacity_ && axis == 0 && !reversed) return buf_;
    Tensor out(dtype_, out_shape);
    if (n == 0 || shape_numel(slice) == 0) return out;
    // slice = [outer..., inner...] split at axis: step t's chunk o goes to out[o][t].
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= slice[static_cast<size_t>(d)];
    const size_t chunk = slice_bytes() / static_cast<size_t>(outer);
    const char* src = static_cast<const char*>(buf_.data());
    char* dst = static_cast<char*>(out.data());
    for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = reversed ? n - 1 - t : t;
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(dst + (static_cast<size_t>(o * n + pos)) * chunk,
                        src + static_cast<size_t>(t) * slice_bytes() + static_cast<size_t>(o) * chunk, chunk);
    }
    return out;
}

}  // namespace kiln::runtime::vm
