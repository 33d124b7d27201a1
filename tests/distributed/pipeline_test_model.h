// What the pipeline-parallel tests under mpiexec share (pipeline_parallel_test.cc,
// pipeline_checkpoint_test.cc): the MLP of mlp_test_model.h written to a file, its global
// batches of 8, and the training options.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "kiln/training.h"
#include "mlp_test_model.h"

namespace kiln::distributed::testing {

constexpr int64_t kBatch = 8;
constexpr int kMicro = 4;

inline std::map<std::string, Tensor> batch_of(int step) {
    Tensor x(DType::kFloat32, {kBatch, kIn});
    std::vector<float> v = random_floats(kBatch * kIn, static_cast<uint32_t>(500 + step), 2.0f);
    std::copy(v.begin(), v.end(), x.data_as<float>());
    Tensor y(DType::kInt64, {kBatch});
    for (int64_t i = 0; i < kBatch; ++i) y.data_as<int64_t>()[i] = (i * 7 + step) % kClasses;
    return {{"x", x}, {"labels", y}};
}

inline TrainingOptions options(const std::string& optimizer) {
    TrainingOptions o;
    o.session.dims = {{"N", kBatch}};
    o.session.threads = 1;
    o.optimizer.kind = optimizer;
    o.optimizer.lr = optimizer == "adam" ? 0.01 : 0.1;
    o.optimizer.momentum = optimizer == "sgd" ? 0.9 : 0.0;
    // Adam's eps 1e-3, not 1e-8: W0[15]'s first gradient is 6e-8, a sum of terms near 0.1, so its
    // float32 rounding (either summation order) is of its own size, and g / (sqrt(v) + 1e-8)
    // turned that into a 2e-6 difference of the weight (2e-4 x lr). With eps 1e-3 a gradient's
    // rounding moves the update by at most ~1e-6 x lr; m, v and the bias correction are unchanged.
    if (optimizer == "adam") o.optimizer.eps = 1e-3;
    return o;
}

/// The MLP written once per process (every rank writes its own copy).
inline std::string model_path() {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("kiln_pp_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "mlp.onnx").string();
    if (!fs::exists(path)) {
        std::ofstream f(path, std::ios::binary);
        mlp().SerializeToOstream(&f);
    }
    return path;
}

}  // namespace kiln::distributed::testing
