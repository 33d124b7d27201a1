// The background -O3 build of a tiered compile (kernel_upgrade.h).
#include "compiler/kernel_upgrade.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <exception>

#include "codegen/compile_driver.h"

namespace kiln::compiler {

// A nice value is per thread on Linux and inherited by the threads and processes a thread
// starts: the build's own worker threads and compiler processes all run below the model's.
constexpr int kBackgroundNice = 10;

KernelUpgrade::KernelUpgrade(std::shared_ptr<runtime::Executable> exe, std::vector<std::string> sources, int jobs) {
    thread_ = std::thread([this, exe = std::move(exe), sources = std::move(sources), jobs]() mutable {
        run(std::move(exe), std::move(sources), jobs);
    });
}

KernelUpgrade::~KernelUpgrade() { wait(); }

void KernelUpgrade::run(std::shared_ptr<runtime::Executable> exe, std::vector<std::string> sources, int jobs) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), kBackgroundNice);
    std::string error;
    try {
        std::vector<int> kernels;
        std::vector<std::string> libraries, symbols;
        const std::vector<codegen::KernelBuild> builds =
            codegen::compile_c_kernels(sources, jobs, codegen::Optimization::kHot);
        for (size_t k = 0; k < builds.size(); ++k) {
            kernels.push_back(static_cast<int>(k));
            libraries.push_back(builds[k].library.path);
            symbols.push_back(builds[k].symbol);
        }
        exe->replace_kernels(kernels, libraries, symbols);
    } catch (const std::exception& e) {
        error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = error;
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void KernelUpgrade::wait() const {
    std::call_once(joined_, [this] {
        if (thread_.joinable()) thread_.join();
    });
}

bool KernelUpgrade::done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
}

double KernelUpgrade::seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seconds_;
}

std::string KernelUpgrade::error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
}

}  // namespace kiln::compiler
