// Batch assembly and output splitting (batch_tensors.h).
#include "serve/batch_tensors.h"

#include <cstring>
#include <string>

#include "kiln/error.h"

namespace kiln::serve {
namespace {

/// Copies `count` elements from src[src_at...] to dst[dst_at...] (elements, not bytes).
void copy_elements(Tensor& dst, int64_t dst_at, const Tensor& src, int64_t src_at, int64_t count) {
    if (count == 0) return;
    if (dst.dtype() == DType::kString) {
        const std::string* s = src.data_as<std::string>() + src_at;
        std::string* d = dst.data_as<std::string>() + dst_at;
        for (int64_t i = 0; i < count; ++i) d[i] = s[i];
        return;
    }
    size_t esize = dtype_size(dst.dtype());
    std::memcpy(static_cast<char*>(dst.data()) + dst_at * esize,
                static_cast<const char*>(src.data()) + src_at * esize, static_cast<size_t>(count) * esize);
}

}  // namespace

Tensor concat_rows(const std::vector<const Tensor*>& parts) {
    KILN_ICHECK(!parts.empty());
    Shape shape = parts[0]->shape();
    KILN_ICHECK(!shape.empty());
    int64_t rows = 0;
    for (const Tensor* p : parts) {
        KILN_ICHECK(p->dtype() == parts[0]->dtype() && p->shape().size() == shape.size());
        rows += p->shape()[0];
    }
    shape[0] = rows;
    Tensor out(parts[0]->dtype(), shape);
    int64_t at = 0;
    for (const Tensor* p : parts) {
        copy_elements(out, at, *p, 0, p->numel());
        at += p->numel();
    }
    return out;
}

Tensor slice_rows(const Tensor& t, int64_t begin, int64_t rows) {
    KILN_ICHECK(!t.shape().empty() && begin >= 0 && begin + rows <= t.shape()[0]);
    Shape shape = t.shape();
    int64_t row_elems = shape[0] == 0 ? 0 : t.numel() / shape[0];
    shape[0] = rows;
    Tensor out(t.dtype(), shape);
    copy_elements(out, 0, t, begin * row_elems, rows * row_elems);
    return out;
}

}  // namespace kiln::serve
