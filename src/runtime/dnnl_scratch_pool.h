// ScratchPool: oneDNN scratchpads lent from one process-wide set of byte buffers instead of one
// buffer per kernel. A kernel's scratchpad is needed only while its primitive runs, and a
// step's kernels run one after the other (one part per intra-op thread at a time), so the set
// holds about one buffer per concurrently running part, each the largest size asked. The
// Winograd backward convolutions (conv_backward_choice.h) need 5-15 MB each for ResNet-18 at
// batch 16: as buffers of their own they added ~150 MB (1 thread) to 220 MB (2 threads) of
// peak RSS to a training session, and the forward Winograd convs' ~100 MB to ResNet-50's
// inference session. Used by dnnl_conv_backward.cc and dnnl_kernels.cc (ScratchLease);
// include only where KILN_HAVE_DNNL is set.
#pragma once

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/dnnl_engine.h"

namespace kiln::runtime {

class ScratchPool {
public:
    static ScratchPool& instance() {
        static ScratchPool* pool = new ScratchPool();  // never destroyed: kernels outlive statics
        return *pool;
    }

    /// A buffer of at least desc.get_size() bytes as a memory of `desc`; give() it back.
    dnnl::memory take(const dnnl::memory::desc& desc) {
        const size_t need = desc.get_size();
        Buffer b;
        {
            std::lock_guard<std::mutex> lock(mu_);
            size_t best = free_.size();
            for (size_t i = 0; i < free_.size(); ++i)
                if (free_[i].size >= need && (best == free_.size() || free_[i].size < free_[best].size)) best = i;
            if (best == free_.size() && !free_.empty()) best = 0;  // too small: replaced below
            if (best < free_.size()) {
                b = std::move(free_[best]);
                free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
            }
        }
        if (b.size < need) b = Buffer::of(need);
        void* data = b.data.get();
        dnnl::memory m(desc, cpu_engine(), data);
        std::lock_guard<std::mutex> lock(mu_);
        lent_.emplace(data, std::move(b));
        return m;
    }

    void give(const dnnl::memory& m) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = lent_.find(m.get_data_handle());
        if (it == lent_.end()) return;
        free_.push_back(std::move(it->second));
        lent_.erase(it);
    }

private:
    struct Buffer {
        struct Free {
            void operator()(void* p) const { std::free(p); }
        };
        std::unique_ptr<void, Free> data;
        size_t size = 0;
        static Buffer of(size_t bytes) {
            const size_t rounded = (bytes + 63) / 64 * 64;
            Buffer b;
            b.data.reset(std::aligned_alloc(64, rounded));
            if (!b.data) throw std::bad_alloc();
            b.size = rounded;
            return b;
        }
    };
    std::mutex mu_;
    std::vector<Buffer> free_;
    std::unordered_map<void*, Buffer> lent_;
};

/// A scratchpad of `desc` from ScratchPool::instance() for one call (none for size 0), given
/// back when the lease ends (also when the primitive throws).
class ScratchLease {
public:
    explicit ScratchLease(const dnnl::memory::desc& desc) {
        if (desc.get_size() > 0) mem_ = ScratchPool::instance().take(desc), held_ = true;
    }
    ~ScratchLease() {
        if (held_) ScratchPool::instance().give(mem_);
    }
    ScratchLease(const ScratchLease&) = delete;
    ScratchLease& operator=(const ScratchLease&) = delete;
    explicit operator bool() const { return held_; }
    dnnl::memory& get() { return mem_; }

private:
    dnnl::memory mem_;
    bool held_ = false;
};

}  // namespace kiln::runtime
