// The small MLP the distributed training tests train (data_parallel_overlap_test.cc,
// parameter_server_test.cc, pipeline_parallel_test.cc): Gemm(transB=1) + Relu, kLayers times,
// x: [N, kIn] -> logits [N, kClasses], with seeded random weights; and how those tests compare a
// trained tensor with the one-process reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../frontend/onnx_model_builder.h"
#include "kiln/tensor.h"

namespace kiln::distributed::testing {

constexpr int64_t kIn = 16, kHidden = 32, kClasses = 3, kLayers = 4;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

inline onnx::ModelProto mlp() {
    using namespace kiln::frontend::testing;
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), kIn});
    std::string x = "x";
    for (int l = 0; l < kLayers; ++l) {
        const int64_t in = l == 0 ? kIn : kHidden, out = l == kLayers - 1 ? kClasses : kHidden;
        const std::string w = "W" + std::to_string(l), b = "b" + std::to_string(l);
        add_float_init(g, w, {out, in}, random_floats(static_cast<size_t>(out * in), 10 + l, 1.0f / std::sqrt(float(in))));
        add_float_init(g, b, {out}, random_floats(static_cast<size_t>(out), 20 + l, 0.1f));
        const std::string y = l == kLayers - 1 ? "logits" : "h" + std::to_string(l);
        attr_int(add_node(g, "Gemm", {x, w, b}, {y + "_g"}, "fc" + std::to_string(l)), "transB", 1);
        add_node(g, l == kLayers - 1 ? "Identity" : "Relu", {y + "_g"}, {y}, "act" + std::to_string(l));
        x = y;
    }
    add_output(g, "logits", {std::string("N"), kClasses});
    return m;
}

/// `got` equals `want` within 1e-6 relative to each element plus 1e-6 of want's largest magnitude
/// (a sum of partial sums in another order), element by element, naming `what` and the index.
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    double scale = 0;
    for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.get_f64(i)));
    for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.get_f64(i), want.get_f64(i), 1e-6 * std::abs(want.get_f64(i)) + 1e-6 * scale)
            << what << "[" << i << "]";
}

}  // namespace kiln::distributed::testing
