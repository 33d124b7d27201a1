// oneDNN extern kernels whose weights are not constants: in a training step the parameters are
// graph inputs and gradients multiply computed tensors (dW = X^T dY, a data gradient's flipped
// conv weights), so Conv/Gemm/MatMul units read their weights (and bias) on every call. Each
// case compiles the same graph with kernels=dnnl (which must give an extern kernel: a test of
// the matcher) and kernels=generated, runs both at one and two threads (two threads split the
// step into parts that share one per-call weight reorder) and checks both against naive
// float64 loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "runtime/caching_allocator.h"
#include "runtime/extern_kernel.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::compiler {
namespace {

using Ints = std::vector<int64_t>;

ir::TensorType f32(const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

Tensor random_tensor(const Shape& s, uint32_t seed) {
    Tensor t(DType::kFloat32, s);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
}

struct Ran {
    std::vector<Tensor> outputs;
    int externs = 0;
};

/// Compiles the graph `build` makes under `source` and runs it on `inputs` with `threads`.
Ran compile_and_run(const std::function<ir::Graph()>& build, KernelSource source, int threads,
                    const std::vector<Tensor>& inputs) {
    ir::Graph g = build();
    CompileOptions opts;
    opts.kernels = source;
    CompiledModel m = compile(g, opts);
    Ran r;
    for (const KernelInfo& k : m.kernels) r.externs += !k.extern_name.empty();
    auto alloc = runtime::make_session_allocator(0);
    runtime::ThreadPool pool(threads);
    runtime::SequentialExecutor ex(m.executable, &pool, alloc.get());
    Status st = ex.run(inputs, r.outputs);
    EXPECT_TRUE(st.ok()) << st.message();
    return r;
}

/// Both kernel sources, one and two threads, against `want`; dnnl must use an extern kernel.
void check_both_sources(const std::function<ir::Graph()>& build, const std::vector<Tensor>& inputs,
                        const std::vector<double>& want, const std::string& what) {
    for (KernelSource source : {KernelSource::kDnnl, KernelSource::kGenerated})
        for (int threads : {1, 2}) {
            const std::string label = what + (source == KernelSource::kDnnl ? " dnnl" : " generated") + ", " +
                                      std::to_string(threads) + " thread(s)";
            Ran r = compile_and_run(build, source, threads, inputs);
            if (source == KernelSource::kDnnl) EXPECT_GE(r.externs, 1) << label << ": no oneDNN kernel";
            else EXPECT_EQ(r.externs, 0) << label;
            ASSERT_EQ(r.outputs.size(), 1u) << label;
            ASSERT_EQ(r.outputs[0].numel(), static_cast<int64_t>(want.size())) << label;
            const float* got = r.outputs[0].data_as<float>();
            for (size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << label << ", element " << i;
        }
}

struct ConvCase {
    Shape x;  // N, C, H, W
    int64_t m, k, stride, pad, group;
    bool bias, relu, residual;
};

void check_conv(const ConvCase& c) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3], cg = ch / c.group, mg = c.m / c.group;
    const int64_t oh = (h + 2 * c.pad - c.k) / c.stride + 1, ow = (w + 2 * c.pad - c.k) / c.stride + 1;
    const Shape ws = {c.m, cg, c.k, c.k}, ys = {n, c.m, oh, ow};
    auto build = [&] {
        ir::Graph g;
        std::vector<ir::Value*> in = {g.add_input("x", f32(c.x)), g.add_input("w", f32(ws))};
        if (c.bias) in.push_back(g.add_input("b", f32({c.m})));
        ir::Value* res = c.residual ? g.add_input("r", f32(ys)) : nullptr;
        ir::Value* y = g.add_node("Conv", in,
                                  {{"kernel_shape", Ints{c.k, c.k}}, {"strides", Ints{c.stride, c.stride}},
                                   {"pads", Ints{c.pad, c.pad, c.pad, c.pad}}, {"group", c.group}},
                                  {f32(ys)}, {"y"}, "conv")
                           ->output(0);
        if (c.residual) y = g.add_node("Add", {y, res}, {}, {f32(ys)}, {"y_res"}, "res")->output(0);
        if (c.relu) y = g.add_node("Relu", {y}, {}, {f32(ys)}, {"y_relu"}, "relu")->output(0);
        g.add_output(y);
        return g;
    };
    std::vector<Tensor> inputs = {random_tensor(c.x, 1), random_tensor(ws, 2)};
    if (c.bias) inputs.push_back(random_tensor({c.m}, 3));
    if (c.residual) inputs.push_back(random_tensor(ys, 4));
    const float *X = inputs[0].data_as<float>(), *W = inputs[1].data_as<float>();
    std::vector<double> want(static_cast<size_t>(shape_numel(ys)));
    for (int64_t b = 0; b < n; ++b)
        for (int64_t o = 0; o < c.m; ++o)
            for (int64_t y = 0; y < oh; ++y)
                for (int64_t x = 0; x < ow; ++x) {
                    double s = c.bias ? inputs[2].data_as<float>()[o] : 0.0;
                    const int64_t g0 = (o / mg) * cg;
                    for (int64_t i = 0; i < cg; ++i)
                        for (int64_t ky = 0; ky < c.k; ++ky)
                            for (int64_t kx = 0; kx < c.k; ++kx) {
                                const int64_t iy = y * c.stride - c.pad + ky, ix = x * c.stride - c.pad + kx;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                                s += static_cast<double>(X[((b * ch + g0 + i) * h + iy) * w + ix]) *
                                     W[((o * cg + i) * c.k + ky) * c.k + kx];
                            }
                    const size_t at = static_cast<size_t>(((b * c.m + o) * oh + y) * ow + x);
                    if (c.residual) s += inputs.back().data_as<float>()[at];
                    want[at] = c.relu ? std::max(0.0, s) : s;
                }
    check_both_sources(build, inputs, want, "conv x " + std::to_string(ch) + "->" + std::to_string(c.m));
}

TEST(DnnlRuntimeWeights, ConvWithWeightsAsInputs) {
    check_conv({{2, 16, 14, 14}, 32, 3, 1, 1, 1, true, true, false});   // split by images at 2 threads
    check_conv({{3, 3, 17, 15}, 8, 5, 2, 2, 1, false, false, false});   // the stem's few channels, strided
    check_conv({{1, 32, 9, 9}, 32, 1, 2, 0, 1, true, false, false});    // one image: split by channel blocks
    check_conv({{2, 32, 8, 8}, 32, 3, 1, 1, 32, false, true, false});   // depthwise
    check_conv({{2, 16, 10, 10}, 16, 3, 1, 1, 1, false, true, true});   // residual Add, then Relu
}

struct GemmCase {
    int64_t m, k, n;
    bool ta, tb, bias;
};

void check_gemm(const GemmCase& c) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const Shape as = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, bs = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
    auto build = [&] {
        ir::Graph g;
        std::vector<ir::Value*> in = {g.add_input("a", f32(as)), g.add_input("b", f32(bs))};
        if (c.bias) in.push_back(g.add_input("c", f32({c.n})));
        ir::Value* y = g.add_node("Gemm", in, {{"transA", int64_t{c.ta}}, {"transB", int64_t{c.tb}}}, {f32({c.m, c.n})},
                                  {"y"}, "gemm")
                           ->output(0);
        g.add_output(y);
        return g;
    };
    std::vector<Tensor> inputs = {random_tensor(as, 5), random_tensor(bs, 6)};
    if (c.bias) inputs.push_back(random_tensor({c.n}, 7));
    const float *A = inputs[0].data_as<float>(), *B = inputs[1].data_as<float>();
    std::vector<double> want(static_cast<size_t>(c.m * c.n));
    for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
            double s = c.bias ? inputs[2].data_as<float>()[j] : 0.0;
            for (int64_t q = 0; q < c.k; ++q)
                s += static_cast<double>(c.ta ? A[q * c.m + i] : A[i * c.k + q]) * (c.tb ? B[j * c.k + q] : B[q * c.n + j]);
            want[static_cast<size_t>(i * c.n + j)] = s;
        }
    check_both_sources(build, inputs, want,
                       "gemm " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
}

TEST(DnnlRuntimeWeights, GemmWithWeightsAndBiasAsInputs) {
    check_gemm({48, 24, 40, false, true, true});    // a Linear layer's forward: x W^T + b
    check_gemm({40, 48, 24, true, false, false});   // its weight gradient: dY^T X
    check_gemm({48, 40, 24, false, false, false});  // its data gradient: dY W
    check_gemm({5, 64, 200, true, true, true});     // few rows
}

TEST(DnnlRuntimeWeights, MatMulWithComputedB) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    // [2, 24, 16] x [16, 20] (B shared across the batch) + bias [20] (an input), then Relu.
    const int64_t bt = 2, m = 24, k = 16, n = 20;
    auto build = [&] {
        ir::Graph g;
        ir::Value* a = g.add_input("a", f32({bt, m, k}));
        ir::Value* b = g.add_input("b", f32({k, n}));
        ir::Value* bias = g.add_input("bias", f32({n}));
        ir::Value* y = g.add_node("MatMul", {a, b}, {}, {f32({bt, m, n})}, {"mm"}, "mm")->output(0);
        y = g.add_node("Add", {y, bias}, {}, {f32({bt, m, n})}, {"biased"}, "bias")->output(0);
        y = g.add_node("Relu", {y}, {}, {f32({bt, m, n})}, {"y"}, "relu")->output(0);
        g.add_output(y);
        return g;
    };
    std::vector<Tensor> inputs = {random_tensor({bt, m, k}, 8), random_tensor({k, n}, 9), random_tensor({n}, 10)};
    const float *A = inputs[0].data_as<float>(), *B = inputs[1].data_as<float>(), *C = inputs[2].data_as<float>();
    std::vector<double> want(static_cast<size_t>(bt * m * n));
    for (int64_t r = 0; r < bt * m; ++r)
        for (int64_t j = 0; j < n; ++j) {
            double s = C[j];
            for (int64_t q = 0; q < k; ++q) s += static_cast<double>(A[r * k + q]) * B[q * n + j];
            want[static_cast<size_t>(r * n + j)] = std::max(0.0, s);
        }
    check_both_sources(build, inputs, want, "matmul+bias+relu");
}

}  // namespace
}  // namespace kiln::compiler
