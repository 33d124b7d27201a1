// A host tensor: dtype, static shape and a shared, 64-byte-aligned byte buffer.
// Used for constants in the IR, the interpreter's buffers, and runtime inputs/outputs.
// A DType::kString tensor holds std::string objects (data_as<std::string>()); it is always owned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[1,3,224,224]"

class Tensor {
public:
    Tensor() = default;
    /// Allocates zero-filled storage.
    Tensor(DType dtype, Shape shape);
    /// Wraps external memory without owning it (caller keeps it alive).
    static Tensor borrow(DType dtype, Shape shape, void* data);
    /// Takes shared ownership of `storage` (at least nbytes, 64-byte aligned; e.g. a block from
    /// an allocator whose deleter gives it back). Contents are left as they are.
    static Tensor from_storage(DType dtype, Shape shape, std::shared_ptr<void> storage);

    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int64_t numel() const { return shape_numel(shape_); }
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
    bool defined() const { return data_ != nullptr || numel() == 0; }
    /// Whether this handle is the only owner of its storage (false for a borrowed tensor): its
    /// memory can then be handed to someone else without a copy (the Python binding's outputs).
    bool sole_owner() const { return storage_ != nullptr && storage_.use_count() == 1; }

    void* data() { return data_; }
    const void* data() const { return data_; }
    template <typename T> T* data_as() { return static_cast<T*>(data_); }
    template <typename T> const T* data_as() const { return static_cast<const T*>(data_); }

    /// Element i converted to double / int64 (any dtype). For small tensors, tests, attributes.
    double get_f64(int64_t i) const;
    int64_t get_i64(int64_t i) const;
    void set_f64(int64_t i, double v);
    void set_i64(int64_t i, int64_t v);

    /// Exchanges two handles field by field (std::swap's three moves stored the dtype byte and
    /// read it back as part of a wider load: a stalled store forward per swap, which a VM Loop
    /// does per carried value and iteration).
    friend void swap(Tensor& a, Tensor& b) noexcept {
        std::swap(a.dtype_, b.dtype_);
        a.shape_.swap(b.shape_);
        a.storage_.swap(b.storage_);
        std::swap(a.data_, b.data_);
    }

    /// Deep copy.
    Tensor clone() const;
    /// Same storage, new shape with the same element count.
    Tensor reshaped(Shape shape) const;

private:
    DType dtype_ = DType::kFloat32;
    Shape shape_;
    std::shared_ptr<void> storage_;  // null when borrowed
    void* data_ = nullptr;
};

}  // namespace kiln
