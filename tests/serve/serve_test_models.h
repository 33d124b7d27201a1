// Test helpers for the serve tests: a temporary model repository with small ONNX models built
// through the ONNX protobuf API.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include "../frontend/onnx_model_builder.h"
#include "kiln/tensor.h"

namespace kiln::serve::testing {

namespace fs = std::filesystem;
using namespace kiln::frontend::testing;

/// A repository folder removed at the end of the test.
struct TempRepo {
    fs::path root;
    explicit TempRepo(const std::string& tag) {
        root = fs::temp_directory_path() / ("kiln_serve_" + tag + "_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
    }
    ~TempRepo() { fs::remove_all(root); }
    /// Writes DIR/<name>/<version>/model.onnx (and config.pbtxt when given).
    void add(const std::string& name, const onnx::ModelProto& m, const std::string& config = "", int version = 1) {
        fs::path dir = root / name / std::to_string(version);
        fs::create_directories(dir);
        std::ofstream f(dir / "model.onnx", std::ios::binary);
        m.SerializeToOstream(&f);
        if (!config.empty()) std::ofstream(root / name / "config.pbtxt") << config;
    }
    void copy(const std::string& name, const std::string& onnx_path, int version = 1) {
        fs::path dir = root / name / std::to_string(version);
        fs::create_directories(dir);
        fs::copy_file(onnx_path, dir / "model.onnx");
    }
};

inline std::vector<float> pattern(size_t n, float scale) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = scale * (static_cast<float>(i % 7) - 3.0f);
    return w;
}

/// y = Relu(x @ W + b): x [N, 4] -> y [N, 3]. Row-independent: batching must not change a bit.
inline onnx::ModelProto mlp_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W", {4, 3}, pattern(12, 0.25f));
    add_float_init(g, "b", {3}, {0.5f, -0.25f, 0.125f});
    add_node(g, "MatMul", {"x", "W"}, {"xw"});
    add_node(g, "Add", {"xw", "b"}, {"z"});
    add_node(g, "Relu", {"z"}, {"y"});
    add_output(g, "y", {std::string("N"), int64_t{3}});
    return m;
}

/// A chain of `depth` [width x width] matmuls with tanh: long enough runs to overlap.
inline onnx::ModelProto deep_model(int width, int depth) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{width}});
    std::string cur = "x";
    add_float_init(g, "W", {width, width}, pattern(static_cast<size_t>(width) * width, 0.5f / width));
    for (int i = 0; i < depth; ++i) {
        std::string mm = "mm" + std::to_string(i), t = "t" + std::to_string(i);
        add_node(g, "MatMul", {cur, "W"}, {mm});
        add_node(g, "Tanh", {mm}, {t});
        cur = t;
    }
    add_node(g, "Identity", {cur}, {"y"});
    add_output(g, "y", {std::string("N"), int64_t{width}});
    return m;
}

inline Tensor random_tensor(Shape shape, uint32_t seed) {
    Tensor t(DType::kFloat32, shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

/// The server's output against a session of its own on the same model: equal but for the last
/// bits a tiered compile allows (compiler/kernel_upgrade.h: with a cold kernel cache one side
/// may run the quick kernels while the other finds the -O3 ones the first side's background
/// build has just cached). f32 outputs within 1e-5 (relative to 1 + |b|); other dtypes exact.
inline bool same_values(const Tensor& a, const Tensor& b) {
    if (bit_equal(a, b)) return true;
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || a.shape() != b.shape()) return false;
    const float* x = a.data_as<float>();
    const float* y = b.data_as<float>();
    for (int64_t i = 0; i < a.numel(); ++i)
        if (!(std::fabs(x[i] - y[i]) <= 1e-5f * (1.0f + std::fabs(y[i])))) return false;
    return true;
}

}  // namespace kiln::serve::testing
