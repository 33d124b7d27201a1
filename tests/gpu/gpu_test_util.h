// Shared by the GPU tests: the default-schedule cases (IR text graphs), and the device or a skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_device.h"

namespace kiln::gpu_testing {

struct Case {
    const char* name;
    const char* graph;  // IR text (ir/parser.h)
};

/// One case per default GPU schedule: injective (a fused elementwise chain with a broadcast),
/// reductions (softmax: max, exp-sum and divide stages; layer norm), and matmul (with its
/// fused bias + relu epilogue) at sizes whose thread counts are not multiples of the block.
inline const std::vector<Case>& schedule_cases() {
    static const std::vector<Case> cases = {
        {"elementwise", R"(
graph g(%a: f32[3,1000], %b: f32[1000]) {
  %s = Add(%a, %b) : f32[3,1000]
  %e = Exp(%s) : f32[3,1000]
  %y = Relu(%e) : f32[3,1000]
  return %y
})"},
        {"softmax", R"(
graph g(%x: f32[8,77]) {
  %y = Softmax(%x) {axis=1} : f32[8,77]
  return %y
})"},
        {"layer_norm", R"(
graph g(%x: f32[6,130], %w: f32[130], %b: f32[130]) {
  %y = LayerNormalization(%x, %w, %b) {axis=-1} : f32[6,130]
  return %y
})"},
        {"matmul_bias_relu", R"(
graph g(%a: f32[33,200], %b: f32[200,70], %c: f32[70]) {
  %m = MatMul(%a, %b) : f32[33,70]
  %s = Add(%m, %c) : f32[33,70]
  %y = Relu(%s) : f32[33,70]
  return %y
})"},
    };
    return cases;
}

/// CumSum has no CUDA kernel (the CPU runtime's own kernel computes it): placed on the host
/// between GPU kernels.
inline const char* placement_case() {
    return R"(
graph g(%x: f32[4,300]) {
  const %axis: i64[] = [1]
  %n = Neg(%x) : f32[4,300]
  %c = CumSum(%n, %axis) : f32[4,300]
  %y = Relu(%c) : f32[4,300]
  return %y
})";
}

/// A model of scripts/make_models.py: in $KILN_GPU_MODELS when set (the GPU machine), else in
/// the build's test_models/ (the make_test_models fixture).
inline std::string test_model_path(const std::string& name) {
    const char* dir = std::getenv("KILN_GPU_MODELS");
    return (dir ? std::string(dir) : std::string(KILN_BINARY_DIR) + "/test_models") + "/" + name + ".onnx";
}

/// The CUDA device, or nullptr after GTEST_SKIP-worthy reason in *why.
inline runtime::cuda::CudaDevice* device_or_reason(std::string* why) { return runtime::cuda::CudaDevice::get(why); }

}  // namespace kiln::gpu_testing

/// Skips the test (cleanly) on a machine without a usable GPU.
#define KILN_REQUIRE_GPU(dev)                                                    \
    std::string kiln_gpu_why_;                                                   \
    ::kiln::runtime::cuda::CudaDevice* dev = ::kiln::gpu_testing::device_or_reason(&kiln_gpu_why_); \
    if (!dev) GTEST_SKIP() << "no GPU: " << kiln_gpu_why_
