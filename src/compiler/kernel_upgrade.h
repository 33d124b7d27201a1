// Tiered compiles: a model whose kernels are missing from the kernel cache first runs on kernels
// compiled quickly (codegen::Optimization::kQuick: -O1 with the vectorizer, unrolled loops left
// rolled), while the same sources compile at -O3 in the background; each kernel then switches
// to its -O3 build (runtime::Executable::replace_kernels), between two of its calls. The -O3
// build is the one a cold compile without tiers makes (the same kernel units), so the cache then
// holds what the next process looks for: it starts on -O3 kernels and compiles nothing.
//
// The background compilers run at a lower priority (nice 10), so the model's own threads keep
// the cores while it is called. The first calls may differ from later ones in the last bits
// (both builds are within the tir interpreter's rounding tolerance): SessionOptions::
// tiered_compile = false (or KILN_TIERED_COMPILE=0) compiles -O3 from the start.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/executable.h"

namespace kiln::compiler {

class KernelUpgrade {
public:
    /// Starts compiling `sources` (kernel k of `exe` is sources[k]) at -O3 with `jobs` compiler
    /// processes (0 = cores, as the first build), then replaces `exe`'s kernels with them.
    KernelUpgrade(std::shared_ptr<runtime::Executable> exe, std::vector<std::string> sources, int jobs);
    /// Waits for the background build: its libraries land in the cache for the next process.
    ~KernelUpgrade();
    KernelUpgrade(const KernelUpgrade&) = delete;
    KernelUpgrade& operator=(const KernelUpgrade&) = delete;

    /// Blocks until the -O3 kernels run (or their build failed: the quick ones then stay).
    void wait() const;
    bool done() const;
    /// Seconds from the start to the switch (0 before it).
    double seconds() const;
    /// The background build's failure ("" when none): the quick kernels keep running.
    std::string error() const;

private:
    void run(std::shared_ptr<runtime::Executable> exe, std::vector<std::string> sources, int jobs);

    mutable std::mutex mu_;
    bool done_ = false;
    double seconds_ = 0;
    std::string error_;
    mutable std::thread thread_;
    mutable std::once_flag joined_;
};

}  // namespace kiln::compiler
