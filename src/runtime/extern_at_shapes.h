// An extern kernel on symbolic shapes (issue 23, docs/dynamic_shapes.md): a oneDNN convolution
// over batch x H x W that one compiled model runs at every size.
//
// oneDNN makes a primitive for one problem size (its jit code, blocking and thread split are
// chosen for it), so the step keeps the factory and its parameter text as a template, and a run
// at dims it has not seen makes the kernel for those shapes: the shape rule
// (runtime/extern_shape_params.h) rewrites the shape-dependent parameters, the factory makes it.
// The kernels of the last few distinct dims are kept (least recently used out): a warm run at a
// held shape pays a key compare under one short lock. The constant weights are reordered into
// oneDNN's layout once per layout, not per shape (WeightCopies in dnnl_kernels.cc shares them by
// the constant's address), so a held shape costs its primitive and scratch buffers only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

class ExternAtShapes final : public ExternKernel {
public:
    /// `args` as for the factory, each with its dim_of (static axes hold their size; symbolic
    /// ones are filled per run) indexing the step's `num_dims` dims. Keeps the `capacity` most
    /// recently used shapes (at least 1).
    ExternAtShapes(std::string name, ExternKernelFactory factory, std::string params, std::vector<ExternArg> args,
                   size_t num_dims, size_t capacity = kDefaultCapacity);

    Status run(void* const* args, const kiln_kernel_env& env, int threads) override;
    Status run_at(void* const* args, const int64_t* dims, const kiln_kernel_env& env, int threads) override;
    /// Makes (or finds) the kernel for `dims` and prepares it for `threads` (runtime/prepare_externs.h).
    void prepare_at(const int64_t* dims, int threads) override;

    /// Kernels made so far (a shape made again after it was dropped counts again) and held now.
    size_t made() const;
    size_t held() const;

    static constexpr size_t kDefaultCapacity = 8;

private:
    /// The kernel for `dims` (null: nothing to compute at those shapes), made on a miss.
    std::shared_ptr<ExternKernel> kernel_at(const std::vector<int64_t>& dims);
    std::shared_ptr<ExternKernel> make_at(const std::vector<int64_t>& dims) const;

    struct Entry {
        std::vector<int64_t> dims;
        std::shared_ptr<ExternKernel> kernel;  // null: an empty output
    };
    const std::string name_;
    const ExternKernelFactory factory_;
    const std::string params_;
    const std::vector<ExternArg> args_;
    const size_t capacity_;
    const size_t num_dims_;
    mutable std::mutex mu_;
    std::list<Entry> lru_;  // most recently used first
    size_t made_ = 0;
};

}  // namespace kiln::runtime
