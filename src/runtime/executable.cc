// Executable loading: each distinct kernel library is dlopened once (RTLD_NOW | RTLD_LOCAL, so
// missing symbols fail here and kernels of different libraries never interpose), then every
// kernel's symbol is resolved (in a library the caller provided under that name, if any);
// extern kernels (oneDNN) are built from their parameters. Libraries stay open as long as the
// Executable lives. A generated kernel may be replaced later by another build of its source
// (replace_kernels): the function pointers are then read and written atomically.
#include "runtime/executable.h"

#include <algorithm>
#include <atomic>
#include <map>

#include "runtime/extern_at_shapes.h"
#include "runtime/extern_kernel.h"
#include "runtime/loaded_library.h"
#include "runtime/run_control.h"
#include "support/error.h"

namespace kiln::runtime {

Executable::~Executable() {
    externs_.clear();
    fns_.clear();
    libs_.clear();
    provided_.clear();
}

void Executable::load() {
    if (!fns_.empty() && fns_.size() == kernels.size()) return;
    std::map<std::string, std::shared_ptr<LoadedLibrary>> by_path;
    std::vector<std::shared_ptr<LoadedLibrary>> libs;
    std::vector<kiln_kernel_fn> fns;
    std::vector<std::shared_ptr<ExternKernel>> externs(kernels.size());
    fns.reserve(kernels.size());
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
        const KernelDesc& k = kernels[ki];
        if (k.is_async || k.is_control()) {  // runtime built-ins (async_kernel.h, frame_executor.h)
            fns.push_back(nullptr);
            continue;
        }
        if (k.is_extern()) {
            externs[ki] = make_extern(static_cast<int>(ki));
            fns.push_back(nullptr);
            continue;
        }
        auto& lib = by_path[k.library];
        if (!lib) {
            auto given = provided_.find(k.library);
            lib = given != provided_.end() ? given->second : std::make_shared<LoadedLibrary>(k.library);
            libs.push_back(lib);
        }
        try {
            fns.push_back(reinterpret_cast<kiln_kernel_fn>(lib->symbol(k.symbol)));
        } catch (Error& e) {
            if (!k.description.empty()) e.add_context("while loading kernel for " + k.description);
            throw;
        }
    }
    libs_ = std::move(libs);
    fns_ = std::move(fns);
    externs_ = std::move(externs);
}

void Executable::provide_library(const std::string& name, std::shared_ptr<LoadedLibrary> lib) {
    KILN_ICHECK(lib != nullptr && fns_.empty()) << "provide_library after load()";
    provided_[name] = std::move(lib);
}

namespace {

/// Per axis of `b`, the position in `step`'s dims of the executable dim it is (-1: static).
std::vector<int> step_dim_of(const BufferDesc& b, const StepDesc& step) {
    std::vector<int> out(b.shape.size(), -1);
    for (size_t k = 0; k < b.dim_of.size() && k < out.size(); ++k) {
        if (b.dim_of[k] < 0) continue;
        auto it = std::find(step.dims.begin(), step.dims.end(), b.dim_of[k]);
        KILN_CHECK(it != step.dims.end(), kInvalidModel)
            << "node '" << step.node_name << "': buffer '" << b.name << "' axis " << k
            << " is a dim the step does not take";
        out[k] = static_cast<int>(it - step.dims.begin());
    }
    return out;
}

}  // namespace

std::shared_ptr<ExternKernel> Executable::make_extern(int kernel) const {
    const KernelDesc& k = kernels[kernel];
    ExternKernelFactory factory = find_extern_kernel(k.extern_name);
    KILN_CHECK(factory, kUnsupported) << "kernel for " << k.description << " needs the extern kernel '" << k.extern_name
                                      << "', which this build of Kiln lacks (built without oneDNN?)";
    const StepDesc* step = nullptr;
    for (const StepDesc& s : steps)
        if (s.kernel == kernel) {
            KILN_ICHECK(!step) << "extern kernel " << kernel << " is shared by two steps";
            step = &s;
        }
    KILN_CHECK(step, kInternal) << "bug in Kiln: extern kernel " << kernel << " has no step";
    std::vector<ExternArg> args;
    for (int id : step->args) {
        const BufferDesc& b = buffers.at(id);
        args.push_back({b.dtype, b.shape, b.role == BufferRole::kConstant ? b.constant.data() : nullptr});
        if (k.takes_dims) args.back().dim_of = step_dim_of(b, *step);
    }
    try {
        // On symbolic shapes the kernel is made per run-time shape (extern_at_shapes.h).
        if (k.takes_dims)
            return std::make_shared<ExternAtShapes>(k.extern_name, factory, k.extern_params, std::move(args),
                                                    step->dims.size());
        return factory(ExternParams(k.extern_params), args);
    } catch (Error& e) {
        e.add_context("while preparing " + k.extern_name + " for node '" + step->node_name + "'");
        throw;
    }
}

Shape BufferDesc::shape_at(const std::vector<int64_t>& dims) const {
    Shape s = shape;
    for (size_t k = 0; k < dim_of.size() && k < s.size(); ++k)
        if (dim_of[k] >= 0) s[k] = dims.at(static_cast<size_t>(dim_of[k]));
    return s;
}

Status kernel_stopped_status() {
    return Status(ErrorKind::kCancelled, "stopped inside the kernel (preempted)");
}

kiln_kernel_fn Executable::kernel_fn(int kernel) const {
    return std::atomic_ref<kiln_kernel_fn>(fns_.at(kernel)).load(std::memory_order_acquire);
}

void Executable::replace_kernels(const std::vector<int>& kernel_ids, const std::vector<std::string>& libraries,
                                 const std::vector<std::string>& symbols) {
    KILN_ICHECK(kernel_ids.size() == libraries.size() && kernel_ids.size() == symbols.size())
        << "replace_kernels: " << kernel_ids.size() << " kernels, " << libraries.size() << " libraries, "
        << symbols.size() << " symbols";
    KILN_ICHECK(loaded()) << "replace_kernels before load()";
    std::lock_guard<std::mutex> lock(replace_mu_);
    std::map<std::string, std::shared_ptr<LoadedLibrary>> by_path;
    std::vector<kiln_kernel_fn> fns;
    for (size_t i = 0; i < kernel_ids.size(); ++i) {
        const KernelDesc& k = kernels.at(static_cast<size_t>(kernel_ids[i]));
        KILN_ICHECK(!k.is_async && !k.is_control() && !k.is_extern())
            << "replace_kernels: kernel " << kernel_ids[i] << " (" << k.description << ") is not a generated kernel";
        auto& lib = by_path[libraries[i]];
        if (!lib) lib = std::make_shared<LoadedLibrary>(libraries[i]);
        fns.push_back(reinterpret_cast<kiln_kernel_fn>(lib->symbol(symbols[i])));
    }
    for (auto& [path, lib] : by_path) libs_.push_back(lib);
    for (size_t i = 0; i < kernel_ids.size(); ++i)
        std::atomic_ref<kiln_kernel_fn>(fns_.at(static_cast<size_t>(kernel_ids[i]))).store(fns[i], std::memory_order_release);
}

Status Executable::run_kernel(int kernel, void* const* args, const kiln_kernel_env& env) const {
    if (ExternKernel* ext = externs_.at(kernel).get()) {
        return ext->run(args, env, kernel_env_threads(env));
    }
    return kernel_status(kernel_fn(kernel)(args, &env));
}

Status Executable::run_kernel(int kernel, void* const* args, const int64_t* dims, const kiln_kernel_env& env) const {
    if (ExternKernel* ext = externs_.at(kernel).get()) return ext->run_at(args, dims, env, kernel_env_threads(env));
    auto fn = reinterpret_cast<kiln_kernel_dims_fn>(kernel_fn(kernel));
    const int32_t rc = fn(args, dims, &env);
    if (rc == KILN_KERNEL_BAD_DIMS) return Status(ErrorKind::kInvalidArgument, "a negative dimension");
    return kernel_status(rc);
}

Status Executable::kernel_status(int32_t rc) {
    if (rc == 0) return Status::ok_status();
    if (rc == KILN_KERNEL_STOPPED) return kernel_stopped_status();
    return Status(ErrorKind::kInternal, "code " + std::to_string(rc) +
                                            (rc == 1 ? " (could not allocate a kernel-local buffer)" : ""));
}

}  // namespace kiln::runtime
