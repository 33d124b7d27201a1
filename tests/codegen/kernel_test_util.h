// Test helpers: compile a tir PrimFunc through emit_c + compile_c, load it through the runtime's
// Executable, and run it on host tensors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/tensor.h"
#include "tir/stmt.h"

namespace kiln::codegen::testing {

/// A loaded kernel; keeps its library open.
struct LoadedKernel {
    std::shared_ptr<runtime::Executable> exe;
    std::string source;
    kiln_kernel_fn fn = nullptr;

    /// Runs the kernel on `args` (params order) with `pool` (nullptr: env without a pool).
    int32_t run(std::vector<Tensor>& args, runtime::ThreadPool* pool = nullptr) const {
        std::vector<void*> ptrs;
        for (auto& t : args) ptrs.push_back(t.data());
        kiln_kernel_env env{};
        if (pool) env = pool->kernel_env();
        return fn(ptrs.data(), pool ? &env : nullptr);
    }

    /// Runs a kernel with symbolic dims (kiln_kernel_dims_fn) at `dims`.
    int32_t run_dims(std::vector<Tensor>& args, const std::vector<int64_t>& dims,
                     runtime::ThreadPool* pool = nullptr) const {
        std::vector<void*> ptrs;
        for (auto& t : args) ptrs.push_back(t.data());
        kiln_kernel_env env{};
        if (pool) env = pool->kernel_env();
        auto dims_fn = reinterpret_cast<kiln_kernel_dims_fn>(reinterpret_cast<void*>(fn));
        return dims_fn(ptrs.data(), dims.data(), pool ? &env : nullptr);
    }
};

inline LoadedKernel load_source(const std::string& source, const std::string& symbol) {
    LoadedKernel k;
    k.source = source;
    CompiledLibrary lib = compile_c(source);
    k.exe = std::make_shared<runtime::Executable>();
    k.exe->kernels.push_back({lib.path, symbol, symbol});
    k.exe->load();
    k.fn = k.exe->kernel_fn(0);
    return k;
}

inline LoadedKernel compile_func(const tir::PrimFunc& f) { return load_source(emit_c(f), f.name); }

/// Tensors for f's params, filled by `fill(param index, element index)` (as double).
template <typename Fill>
std::vector<Tensor> make_args(const tir::PrimFunc& f, Fill fill) {
    std::vector<Tensor> args;
    for (size_t p = 0; p < f.params.size(); ++p) {
        Tensor t(f.params[p]->dtype, f.params[p]->shape);
        for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, fill(p, i));
        args.push_back(std::move(t));
    }
    return args;
}

inline std::vector<Tensor> clone_all(const std::vector<Tensor>& v) {
    std::vector<Tensor> out;
    for (const auto& t : v) out.push_back(t.clone());
    return out;
}

/// Bitwise equality of two tensors (dtype, shape and bytes).
inline ::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
        return ::testing::AssertionFailure() << "dtype/shape differ";
    if (a.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) != 0) {
        for (int64_t i = 0; i < a.numel(); ++i) {
            size_t s = dtype_size(a.dtype());
            if (std::memcmp(static_cast<const char*>(a.data()) + i * s, static_cast<const char*>(b.data()) + i * s, s))
                return ::testing::AssertionFailure()
                       << "element " << i << " differs: " << a.get_f64(i) << " vs " << b.get_f64(i);
        }
    }
    return ::testing::AssertionSuccess();
}

/// Elementwise closeness: |a-b| <= atol + rtol*|b|; NaN matches NaN.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
        return ::testing::AssertionFailure() << "dtype/shape differ";
    for (int64_t i = 0; i < a.numel(); ++i) {
        double x = a.get_f64(i), y = b.get_f64(i);
        if (std::isnan(x) && std::isnan(y)) continue;
        if (x == y) continue;
        if (!(std::abs(x - y) <= atol + rtol * std::abs(y)))
            return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
    }
    return ::testing::AssertionSuccess();
}

}  // namespace kiln::codegen::testing
