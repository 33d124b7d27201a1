// Helpers of the artifact tests: a small hand-built Executable (two generated kernels compiled
// from C, an async copy, two constants, planned intermediates), its reference output computed
// here by plain loops, and a scratch directory.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "codegen/compile_driver.h"
#include "runtime/artifact.h"
#include "runtime/async_kernel.h"
#include "runtime/cpu_features.h"
#include "runtime/executable.h"

namespace kiln::runtime::testing {

inline const char* kTestKernels = R"C(
#include <stdint.h>
typedef void (*kiln_task_fn)(int64_t begin, int64_t end, void* ctx);
typedef struct kiln_kernel_env {
    void* pool;
    void (*parallel_for)(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
} kiln_kernel_env;

typedef struct { const float* a; const float* b; float* c; } add_ctx;
static void add_task(int64_t begin, int64_t end, void* p) {
    add_ctx* x = (add_ctx*)p;
    for (int64_t i = begin; i < end; ++i) x->c[i] = x->a[i] + x->b[i];
}
/* t = x + bias, 24 floats */
int32_t art_add(void* const* args, const kiln_kernel_env* env) {
    add_ctx c = {(const float*)args[0], (const float*)args[1], (float*)args[2]};
    env->parallel_for(env->pool, 24, add_task, &c);
    return 0;
}
/* u = max(t * w[i % 4], 0) */
int32_t art_scale_relu(void* const* args, const kiln_kernel_env* env) {
    const float* t = (const float*)args[0];
    const float* w = (const float*)args[1];
    float* u = (float*)args[2];
    for (int i = 0; i < 24; ++i) { float v = t[i] * w[i % 4]; u[i] = v > 0 ? v : 0; }
    return 0;
}
)C";

/// x (input f32[2,3,4]) -> t = x + bias -> u = relu(t * w) -> async copy -> y (output).
inline std::shared_ptr<Executable> make_test_executable() {
    auto exe = std::make_shared<Executable>();
    const std::string lib = codegen::compile_c(kTestKernels).path;
    exe->kernels = {{lib, "art_add", "Add"}, {lib, "art_scale_relu", "Mul+Relu"}, {"", kAsyncCopySymbol, "Copy", true}};
    BufferDesc x{"x", DType::kFloat32, {2, 3, 4}, BufferRole::kInput, {}};
    BufferDesc bias{"bias", DType::kFloat32, {2, 3, 4}, BufferRole::kConstant, Tensor(DType::kFloat32, {2, 3, 4})};
    for (int64_t i = 0; i < 24; ++i) bias.constant.set_f64(i, i % 3 ? 0.5 * i : -20.0);
    BufferDesc w{"w", DType::kFloat32, {4}, BufferRole::kConstant, Tensor(DType::kFloat32, {4})};
    for (int64_t i = 0; i < 4; ++i) w.constant.set_f64(i, 1.0 + i);
    BufferDesc t{"t", DType::kFloat32, {2, 3, 4}, BufferRole::kIntermediate, {}, 0};
    BufferDesc u{"u", DType::kFloat32, {2, 3, 4}, BufferRole::kIntermediate, {}, 128};
    BufferDesc y{"y", DType::kFloat32, {2, 3, 4}, BufferRole::kOutput, {}};
    exe->buffers = {x, bias, w, t, u, y};
    exe->steps = {{0, {0, 1, 3}, "add1", 2, 24}, {1, {3, 2, 4}, "mul_relu1", 2, 48}, {2, {4, 5}, "copy1", 1, 0}};
    exe->inputs = {0};
    exe->outputs = {5};
    exe->arena_bytes = 256;
    return exe;
}

inline const std::string& test_library_path() {
    static const std::string path = codegen::compile_c(kTestKernels).path;
    return path;
}

/// The model's input for `seed`, and its output by plain loops (the independent reference).
inline Tensor test_input(int seed) {
    Tensor x(DType::kFloat32, {2, 3, 4});
    for (int64_t i = 0; i < 24; ++i) x.set_f64(i, 0.75 * i - 9 + seed);
    return x;
}
inline Tensor reference_output(const Tensor& x) {
    Tensor y(DType::kFloat32, {2, 3, 4});
    for (int64_t i = 0; i < 24; ++i) {
        const float bias = i % 3 ? 0.5f * i : -20.0f;
        const float t = x.data_as<float>()[i] + bias;
        const float v = t * (1.0f + static_cast<float>(i % 4));
        y.data_as<float>()[i] = v > 0 ? v : 0;
    }
    return y;
}

/// A fresh directory removed at the end of the test.
class ScratchDir {
public:
    ScratchDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "kiln_artifact_test_XXXXXX").string();
        path_ = mkdtemp(tmpl.data());
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Runs `f` and returns the kiln::Error it throws (fails the test when it throws none or another exception).
template <typename F>
Error error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "expected a kiln::Error";
    return Error(ErrorKind::kInternal, "no error");
}

}  // namespace kiln::runtime::testing
