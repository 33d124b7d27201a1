// kiln_tensor: a kiln::Tensor behind a C handle, borrowed from the caller or owned.
#include <cstring>
#include <string>

#include "capi/handles.h"
#include "capi/status.h"

using kiln::capi::guard;
using kiln::capi::require;

namespace {

/// The shape from a C (pointer, rank) pair; every extent >= 0, element count and byte size
/// representable.
kiln::Shape shape_from_c(kiln::DType dtype, const int64_t* dims, size_t rank) {
    if (rank > 0) require(dims, "shape (rank > 0)");
    kiln::Shape shape(dims, dims + rank);
    int64_t numel = 1;
    for (size_t i = 0; i < rank; ++i) {
        KILN_CHECK(shape[i] >= 0, kInvalidArgument)
            << "shape " << kiln::shape_str(shape) << ": dimension " << i << " is negative";
        KILN_CHECK(!__builtin_mul_overflow(numel, shape[i], &numel), kInvalidArgument)
            << "shape " << kiln::shape_str(shape) << ": element count overflows";
    }
    size_t bytes = 0;
    KILN_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), kiln::dtype_size(dtype), &bytes), kInvalidArgument)
        << "shape " << kiln::shape_str(shape) << ": byte size overflows";
    return shape;
}

kiln::DType numeric_dtype(kiln_dtype dtype, const char* what) {
    kiln::DType d = kiln::capi::dtype_from_c(dtype, what);
    KILN_CHECK(d != kiln::DType::kString, kUnsupported)
        << what << ": string tensors cannot be made through the C API (only read, from outputs)";
    return d;
}

void require_dense(const kiln_tensor* t, const char* what) {
    KILN_CHECK(t->tensor.dtype() != kiln::DType::kString, kInvalidArgument)
        << what << ": the tensor holds strings (read them with kiln_tensor_string)";
}

}  // namespace

extern "C" {

kiln_status kiln_tensor_borrow(kiln_dtype dtype, const int64_t* shape, size_t rank, const void* data,
                               kiln_tensor** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(out, "out");
        kiln::DType d = numeric_dtype(dtype, "kiln_tensor_borrow");
        kiln::Shape s = shape_from_c(d, shape, rank);
        if (kiln::shape_numel(s) > 0) require(data, "data (the shape has elements)");
        auto t = std::make_unique<kiln_tensor>();
        // Kiln reads inputs only; the const_cast lets kiln::Tensor hold the pointer.
        t->tensor = kiln::Tensor::borrow(d, std::move(s), const_cast<void*>(data));
        *out = t.release();
    });
}

kiln_status kiln_tensor_create(kiln_dtype dtype, const int64_t* shape, size_t rank, kiln_tensor** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(out, "out");
        kiln::DType d = numeric_dtype(dtype, "kiln_tensor_create");
        auto t = std::make_unique<kiln_tensor>();
        t->tensor = kiln::Tensor(d, shape_from_c(d, shape, rank));
        t->writable = true;
        *out = t.release();
    });
}

void kiln_tensor_free(kiln_tensor* tensor) { delete tensor; }

kiln_status kiln_tensor_dtype(const kiln_tensor* tensor, kiln_dtype* out) {
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        *out = kiln::capi::dtype_to_c(tensor->tensor.dtype());
    });
}

kiln_status kiln_tensor_shape(const kiln_tensor* tensor, const int64_t** dims, size_t* rank) {
    return guard([&] {
        require(tensor, "tensor");
        require(dims, "dims");
        require(rank, "rank");
        const kiln::Shape& s = tensor->tensor.shape();
        *dims = s.empty() ? nullptr : s.data();
        *rank = s.size();
    });
}

kiln_status kiln_tensor_element_count(const kiln_tensor* tensor, int64_t* out) {
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        *out = tensor->tensor.numel();
    });
}

kiln_status kiln_tensor_nbytes(const kiln_tensor* tensor, size_t* out) {
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        require_dense(tensor, "kiln_tensor_nbytes");
        *out = tensor->tensor.nbytes();
    });
}

kiln_status kiln_tensor_data(const kiln_tensor* tensor, const void** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        require_dense(tensor, "kiln_tensor_data");
        *out = tensor->tensor.data();
    });
}

kiln_status kiln_tensor_mutable_data(kiln_tensor* tensor, void** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        require_dense(tensor, "kiln_tensor_mutable_data");
        KILN_CHECK(tensor->writable, kInvalidArgument)
            << "kiln_tensor_mutable_data: only a tensor made by kiln_tensor_create is writable "
               "(this one borrows memory or is a run output)";
        *out = tensor->tensor.data();
    });
}

kiln_status kiln_tensor_string(const kiln_tensor* tensor, int64_t index, const char** out, size_t* length) {
    if (out) *out = nullptr;
    return guard([&] {
        require(tensor, "tensor");
        require(out, "out");
        const kiln::Tensor& t = tensor->tensor;
        KILN_CHECK(t.dtype() == kiln::DType::kString, kInvalidArgument)
            << "kiln_tensor_string: expected a string tensor, got dtype " << kiln::dtype_name(t.dtype());
        KILN_CHECK(index >= 0 && index < t.numel(), kInvalidArgument)
            << "kiln_tensor_string: index " << index << " is outside [0, " << t.numel() << ")";
        const std::string& s = t.data_as<std::string>()[index];
        *out = s.c_str();
        if (length) *length = s.size();
    });
}

}  // extern "C"
