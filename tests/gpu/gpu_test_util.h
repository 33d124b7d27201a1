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
/// fused bias + relu epilogue) at sizes whose thread counts are not multiples of the block;
/// then rows longer than a block (the row kernels' strided loops).
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
        {"layer_norm_wide", R"(
graph g(%x: f32[4,1000], %w: f32[1000], %b: f32[1000]) {
  %y = LayerNormalization(%x, %w, %b) {axis=-1, epsilon=0.001} : f32[4,1000]
  return %y
})"},
        {"softmax_wide", R"(
graph g(%x: f32[3,3000]) {
  %y = Softmax(%x) {axis=-1} : f32[3,3000]
  return %y
})"},
    };
    return cases;
}

/// Convolutions cuDNN takes (compiler/cuda_conv_match.h), each with what the compiler keeps
/// generated after it: a bias (a constant, moved into the epilogue) and ReLU; a strided 7x7 stem;
/// a depthwise (grouped) conv; a dilated conv; a 1x1 conv feeding a residual Add; a 1-D conv.
/// `reduction` is each output's sum length (C / group x kernel), for the TF32 bound.
struct ConvCase {
    const char* name;
    const char* graph;
    int reduction;
};

inline const std::vector<ConvCase>& conv_cases() {
    static const std::vector<ConvCase> cases = {
        {"conv3x3_bias_relu", R"(
graph g(%x: f32[2,8,13,17], %w: f32[16,8,3,3]) {
  const %b: f32[16] = [0.246, 0.484, 0.590, 0.885, 0.480, 0.845, -0.942, -0.069, 0.887, 0.298, 0.802, -0.774, -0.062, -0.507, 0.088, 0.148]
  %c = Conv(%x, %w, %b) {pads=[1,1,1,1]} : f32[2,16,13,17]
  %y = Relu(%c) : f32[2,16,13,17]
  return %y
})", 72},
        {"stem7x7_stride2", R"(
graph g(%x: f32[1,3,31,29], %w: f32[8,3,7,7]) {
  const %b: f32[8] = [-0.974, -0.567, -0.441, 0.833, 0.531, -0.681, 0.594, -0.722]
  %y = Conv(%x, %w, %b) {pads=[3,3,3,3], strides=[2,2]} : f32[1,8,16,15]
  return %y
})", 147},
        {"depthwise3x3", R"(
graph g(%x: f32[1,12,10,10], %w: f32[12,1,3,3]) {
  %c = Conv(%x, %w) {pads=[1,1,1,1], group=12} : f32[1,12,10,10]
  %y = Relu(%c) : f32[1,12,10,10]
  return %y
})", 9},
        {"dilated3x3", R"(
graph g(%x: f32[1,6,20,20], %w: f32[10,6,3,3]) {
  %y = Conv(%x, %w) {pads=[2,2,2,2], dilations=[2,2]} : f32[1,10,20,20]
  return %y
})", 54},
        {"conv1x1_residual", R"(
graph g(%x: f32[2,16,7,7], %w: f32[16,16,1,1], %r: f32[2,16,7,7]) {
  const %b: f32[16] = [0.235, -0.747, -0.996, 0.743, -0.581, -0.569, 0.965, 0.745, -0.421, 0.923, 0.078, 0.356, -0.590, 0.882, 0.381, 0.933]
  %c = Conv(%x, %w, %b) : f32[2,16,7,7]
  %s = Add(%c, %r) : f32[2,16,7,7]
  %y = Relu(%s) : f32[2,16,7,7]
  return %y
})", 16},
        {"conv1d", R"(
graph g(%x: f32[2,5,40], %w: f32[7,5,5]) {
  const %b: f32[7] = [0.787, -0.402, -0.278, -0.668, -0.709, -0.870, -0.397]
  %y = Conv(%x, %w, %b) {pads=[2,2], strides=[2]} : f32[2,7,20]
  return %y
})", 25},
    };
    return cases;
}

/// A conv cuDNN cannot take (asymmetric pads): stays a generated kernel.
inline const char* asymmetric_pad_conv_case() {
    return R"(
graph g(%x: f32[1,4,9,9], %w: f32[4,4,3,3]) {
  %y = Conv(%x, %w) {pads=[0,0,1,1], strides=[2,2]} : f32[1,4,4,4]
  return %y
})";
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

/// Three units: a softmax, a product with its Relu (named "m", for pins), a softmax.
inline const char* pinned_case() {
    return R"(
graph g(%x: f32[8,77], %w: f32[77,40]) {
  %s = Softmax(%x) {axis=1} : f32[8,77] # name="s"
  %m = MatMul(%s, %w) : f32[8,40] # name="m"
  %r = Relu(%m) : f32[8,40] # name="r"
  %y = Softmax(%r) {axis=1} : f32[8,40] # name="y"
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
