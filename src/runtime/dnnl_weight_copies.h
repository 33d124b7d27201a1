// WeightCopies: oneDNN's reordered copies of constant weights, shared by the convolution and
// matmul kernels (dnnl_kernels.cc) and the recurrent kernel's GEMMs (rnn_kernel.cc), so that
// the kernels made per shape (runtime/extern_at_shapes.h) reorder a weight once. oneDNN builds
// only (KILN_HAVE_DNNL).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::runtime {

/// oneDNN's copies of constant weights in its layouts, shared by the kernels of the process that
/// reorder the same constant: a session compiling several shape specializations makes a kernel
/// per specialization, over one constant storage (compiler/constant_pool.h), and its weights are
/// held once. Keyed by the constant's address, the element offset of the slice, how Kiln's
/// layout was unpacked, and oneDNN's layout. An entry lives while a kernel holds it; every such
/// kernel's Executable holds the constant, so the address is not reused meanwhile.
class WeightCopies {
public:
    static WeightCopies& global() {
        static WeightCopies* copies = new WeightCopies();  // never destroyed: kernels may outlive statics
        return *copies;
    }
    /// The copy of (constant, offset, unpack) in layout `want`, made by `make` when none is held.
    std::shared_ptr<dnnl::memory> get(const void* constant, int64_t offset, const std::string& unpack,
                                      const dnnl::memory::desc& want, const std::function<dnnl::memory()>& make) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Entry>& list = entries_[Key{constant, offset, unpack}];
        for (auto it = list.begin(); it != list.end();) {
            std::shared_ptr<dnnl::memory> held = it->copy.lock();
            if (!held) {
                it = list.erase(it);
                continue;
            }
            if (it->want == want) return held;
            ++it;
        }
        auto copy = std::make_shared<dnnl::memory>(make());
        list.push_back({want, copy});
        return copy;
    }

    size_t bytes() {
        std::lock_guard<std::mutex> lock(mu_);
        size_t n = 0;
        for (const auto& [key, list] : entries_)
            for (const Entry& e : list)
                if (std::shared_ptr<dnnl::memory> held = e.copy.lock()) n += held->get_desc().get_size();
        return n;
    }

private:
    using Key = std::tuple<const void*, int64_t, std::string>;
    struct Entry {
        dnnl::memory::desc want;
        std::weak_ptr<dnnl::memory> copy;
    };
    std::mutex mu_;
    std::map<Key, std::vector<Entry>> entries_;
};

}  // namespace kiln::runtime
