// TempPool: buffers of one oneDNN layout lent to one call at a time (the activations a part
// reorders into oneDNN's layout, a primitive's scratchpad, a part's partial sum). Concurrent
// runs of a session execute the same kernel at once, and each call needs its own; a single
// caller reuses one buffer on every call. Shared by the oneDNN extern kernels (dnnl_kernels.cc,
// dnnl_conv_backward.cc). Include only where KILN_HAVE_DNNL is set.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"

namespace kiln::runtime {

class TempPool {
public:
    explicit TempPool(dnnl::memory::desc desc) : desc_(std::move(desc)) {}
    const dnnl::memory::desc& desc() const { return desc_; }
    dnnl::memory take() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!free_.empty()) {
                dnnl::memory m = free_.back();
                free_.pop_back();
                return m;
            }
        }
        return dnnl::memory(desc_, cpu_engine());
    }
    void give(dnnl::memory m) {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(std::move(m));
    }

private:
    dnnl::memory::desc desc_;
    std::mutex mu_;
    std::vector<dnnl::memory> free_;
};

}  // namespace kiln::runtime
