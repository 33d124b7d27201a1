// The CPU side of the GPU tests: seeded random inputs of a graph's input types, the graph run by
// the CPU compiler and sequential executor (the reference every GPU result is compared with),
// and the error measure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compiler/compile.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::gpu_testing {

/// Floats uniform in [-1, 1); integers in [0, 7) (valid token ids / indices for the test models).
inline std::vector<Tensor> random_inputs(const ir::Graph& g, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<Tensor> out;
    for (const ir::Value* in : g.inputs()) {
        Tensor t(in->type().dtype, in->type().static_shape());
        if (t.dtype() == DType::kFloat32)
            for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
        else
            for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(rng() % 7));
        out.push_back(std::move(t));
    }
    return out;
}

inline std::vector<Tensor> run_cpu(ir::Graph g, const std::vector<Tensor>& inputs) {
    compiler::CompiledModel cm = compiler::compile(g);
    runtime::ThreadPool pool(2);
    // Owned by a shared_ptr: the output tensors keep it alive (runtime/allocator.h).
    auto alloc = std::make_shared<runtime::CpuAllocator>();
    runtime::SequentialExecutor ex(cm.executable, &pool, alloc.get());
    std::vector<Tensor> outs;
    Status s = ex.run(inputs, outs);
    EXPECT_TRUE(s.ok()) << s.message();
    return outs;
}

/// Largest |a - b| / max(1, |b|) over float outputs; +inf for a shape or count mismatch.
inline double max_rel_error(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].shape() != b[i].shape()) return INFINITY;
        for (int64_t k = 0; k < a[i].numel(); ++k) {
            const double x = a[i].get_f64(k), y = b[i].get_f64(k);
            if (std::isnan(x) != std::isnan(y)) return INFINITY;
            if (!std::isnan(x)) worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
        }
    }
    return worst;
}

/// Per output, max |a - b| / max(1, max |b|) (the worst output): reduced precision (TF32, FP16)
/// errs relative to the scale of a sum, not to each (possibly cancelled) element.
inline double max_scaled_error(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        double diff = 0, scale = 1;
        for (int64_t k = 0; k < b[i].numel(); ++k) {
            diff = std::max(diff, std::abs(a[i].get_f64(k) - b[i].get_f64(k)));
            scale = std::max(scale, std::abs(b[i].get_f64(k)));
        }
        worst = std::max(worst, diff / scale);
    }
    return worst;
}

}  // namespace kiln::gpu_testing
