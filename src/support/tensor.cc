#include "support/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "support/error.h"
#include "support/huge_pages.h"

namespace kiln {

int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

std::string shape_str(const Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) {
        if (i) out += ",";
        out += std::to_string(s[i]);
    }
    return out + "]";
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
    for (int64_t d : shape_) KILN_CHECK(d >= 0, kInvalidArgument) << "negative dimension in shape " << shape_str(shape_);
    size_t bytes = nbytes();
    size_t alloc = (bytes + 63) / 64 * 64;
    if (alloc == 0) alloc = 64;
    void* p = std::aligned_alloc(64, alloc);
    KILN_CHECK(p != nullptr, kOutOfMemory) << "could not allocate " << bytes << " bytes for a tensor of shape "
                                           << shape_str(shape_);
    advise_huge_pages(p, alloc);
    std::memset(p, 0, alloc);
    if (dtype_ == DType::kString) {
        // Strings are objects: construct them here and destroy them with the storage.
        const int64_t n = numel();
        auto* strs = static_cast<std::string*>(p);
        for (int64_t i = 0; i < n; ++i) new (strs + i) std::string();
        storage_ = std::shared_ptr<void>(p, [n](void* q) {
            auto* s = static_cast<std::string*>(q);
            for (int64_t i = 0; i < n; ++i) s[i].~basic_string();
            std::free(q);
        });
    } else {
        storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    }
    data_ = p;
}

Tensor Tensor::borrow(DType dtype, Shape shape, void* data) {
    KILN_ICHECK(dtype != DType::kString) << "string tensors own their elements; they cannot borrow memory";
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.data_ = data;
    return t;
}

Tensor Tensor::from_storage(DType dtype, Shape shape, std::shared_ptr<void> storage) {
    KILN_ICHECK(dtype != DType::kString) << "string tensors own their elements; they cannot adopt storage";
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.data_ = storage.get();
    t.storage_ = std::move(storage);
    return t;
}

Tensor Tensor::clone() const {
    Tensor t(dtype_, shape_);
    if (dtype_ == DType::kString) {
        for (int64_t i = 0; i < numel(); ++i) t.data_as<std::string>()[i] = data_as<std::string>()[i];
        return t;
    }
    if (nbytes()) std::memcpy(t.data_, data_, nbytes());
    return t;
}

Tensor Tensor::reshaped(Shape shape) const {
    KILN_CHECK(shape_numel(shape) == numel(), kInvalidArgument)
        << "cannot reshape " << shape_str(shape_) << " to " << shape_str(shape);
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
}

double Tensor::get_f64(int64_t i) const {
    KILN_CHECK(dtype_ != DType::kString, kInvalidArgument) << "a string tensor has no numeric elements";
    const char* p = static_cast<const char*>(data_) + i * dtype_size(dtype_);
    switch (dtype_) {
        case DType::kFloat32: return *reinterpret_cast<const float*>(p);
        case DType::kFloat64: return *reinterpret_cast<const double*>(p);
        case DType::kFloat16: return half_to_float(*reinterpret_cast<const uint16_t*>(p));
        case DType::kBFloat16: return bfloat16_to_float(*reinterpret_cast<const uint16_t*>(p));
        case DType::kInt8: return *reinterpret_cast<const int8_t*>(p);
        case DType::kInt16: return *reinterpret_cast<const int16_t*>(p);
        case DType::kInt32: return *reinterpret_cast<const int32_t*>(p);
        case DType::kInt64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
        case DType::kUInt8: return *reinterpret_cast<const uint8_t*>(p);
        case DType::kUInt16: return *reinterpret_cast<const uint16_t*>(p);
        case DType::kUInt32: return *reinterpret_cast<const uint32_t*>(p);
        case DType::kUInt64: return static_cast<double>(*reinterpret_cast<const uint64_t*>(p));
        case DType::kBool: return *reinterpret_cast<const uint8_t*>(p) ? 1.0 : 0.0;
        case DType::kInt4: return *reinterpret_cast<const int8_t*>(p);
        case DType::kUInt4: return *reinterpret_cast<const uint8_t*>(p);
        case DType::kFloat8E4M3FN:
        case DType::kFloat8E4M3FNUZ:
        case DType::kFloat8E5M2:
        case DType::kFloat8E5M2FNUZ:
        case DType::kFloat8E8M0:
        case DType::kFloat4E2M1: return lowp_to_float(dtype_, *reinterpret_cast<const uint8_t*>(p));
        case DType::kString: break;
    }
    return 0;
}

int64_t Tensor::get_i64(int64_t i) const {
    const char* p = static_cast<const char*>(data_) + i * dtype_size(dtype_);
    switch (dtype_) {
        case DType::kInt64: return *reinterpret_cast<const int64_t*>(p);
        case DType::kUInt64: return static_cast<int64_t>(*reinterpret_cast<const uint64_t*>(p));
        default: return static_cast<int64_t>(get_f64(i));
    }
}

void Tensor::set_f64(int64_t i, double v) {
    KILN_CHECK(dtype_ != DType::kString, kInvalidArgument) << "a string tensor has no numeric elements";
    char* p = static_cast<char*>(data_) + i * dtype_size(dtype_);
    switch (dtype_) {
        case DType::kFloat32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
        case DType::kFloat64: *reinterpret_cast<double*>(p) = v; break;
        case DType::kFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_half(static_cast<float>(v)); break;
        case DType::kBFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_bfloat16(static_cast<float>(v)); break;
        case DType::kInt8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
        case DType::kInt16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
        case DType::kInt32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
        case DType::kInt64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
        case DType::kUInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
        case DType::kUInt16: *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(v); break;
        case DType::kUInt32: *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
        case DType::kUInt64: *reinterpret_cast<uint64_t*>(p) = static_cast<uint64_t>(v); break;
        case DType::kBool: *reinterpret_cast<uint8_t*>(p) = v != 0.0; break;
        // i4/u4 wrap like the other ints; the low-precision floats use the storage conversion
        // (round to nearest even / e8m0 up, no saturation: see dtype.h).
        case DType::kInt4: *reinterpret_cast<int8_t*>(p) = wrap_int4(static_cast<int64_t>(v)); break;
        case DType::kUInt4: *reinterpret_cast<uint8_t*>(p) = wrap_uint4(static_cast<int64_t>(v)); break;
        case DType::kFloat8E8M0:
            *reinterpret_cast<uint8_t*>(p) = float_to_e8m0(static_cast<float>(v), false);
            break;
        case DType::kFloat8E4M3FN:
        case DType::kFloat8E4M3FNUZ:
        case DType::kFloat8E5M2:
        case DType::kFloat8E5M2FNUZ:
        case DType::kFloat4E2M1:
            *reinterpret_cast<uint8_t*>(p) = float_to_lowp(dtype_, static_cast<float>(v), false);
            break;
        case DType::kString: break;
    }
}

void Tensor::set_i64(int64_t i, int64_t v) {
    char* p = static_cast<char*>(data_) + i * dtype_size(dtype_);
    switch (dtype_) {
        case DType::kInt64: *reinterpret_cast<int64_t*>(p) = v; break;
        case DType::kUInt64: *reinterpret_cast<uint64_t*>(p) = static_cast<uint64_t>(v); break;
        default: set_f64(i, static_cast<double>(v));
    }
}

}  // namespace kiln
