// CompileOptions::one_library (what `kiln compile` embeds): every generated kernel of the
// executable comes from one shared library under its own symbol, and the executable computes
// what naive loops written here compute.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "runtime/caching_allocator.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::compiler {
namespace {

ir::TensorType f32(std::vector<int64_t> s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

constexpr int64_t kN = 300;

// y = Tanh(Sigmoid(Exp(x))) + Relu(x): four kernels at -O0.
ir::Graph branchy_graph() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({2, kN}));
    ir::Value* e = g.add_node("Exp", {x}, {}, {f32({2, kN})}, {"e"}, "exp")->output(0);
    ir::Value* s = g.add_node("Sigmoid", {e}, {}, {f32({2, kN})}, {"s"}, "sigmoid")->output(0);
    ir::Value* t = g.add_node("Tanh", {s}, {}, {f32({2, kN})}, {"t"}, "tanh")->output(0);
    ir::Value* r = g.add_node("Relu", {x}, {}, {f32({2, kN})}, {"r"}, "relu")->output(0);
    g.add_output(g.add_node("Add", {t, r}, {}, {f32({2, kN})}, {"y"}, "add")->output(0));
    return g;
}

TEST(OneLibrary, EveryGeneratedKernelComesFromOneLibraryAndTheModelComputesTheReference) {
    for (int level : {0, 3}) {
        ir::Graph g = branchy_graph();
        CompileOptions o;
        o.opt_level = level;
        o.one_library = true;
        CompiledModel m = compile(g, o);
        ASSERT_FALSE(m.kernel_library.empty());
        std::set<std::string> symbols;
        int generated = 0;
        for (const runtime::KernelDesc& k : m.executable->kernels) {
            if (k.is_async || k.is_extern()) continue;
            ++generated;
            EXPECT_EQ(k.library, m.kernel_library) << k.description;
            EXPECT_EQ(k.symbol.rfind("kiln_kernel_", 0), 0u) << k.symbol;
            symbols.insert(k.symbol);
        }
        EXPECT_EQ(static_cast<int>(symbols.size()), generated) << "two kernels share a symbol";
        EXPECT_EQ(generated, level == 0 ? 5 : 1);

        Tensor x(DType::kFloat32, {2, kN});
        for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(i % 41) / 8.0f - 2.5f;
        runtime::ThreadPool pool(2);
        auto alloc = runtime::make_session_allocator(0);
        runtime::SequentialExecutor ex(m.executable, &pool, alloc.get());
        std::vector<Tensor> outs;
        ASSERT_TRUE(ex.run({x}, outs).ok());
        ASSERT_EQ(outs.size(), 1u);
        for (int64_t i = 0; i < x.numel(); ++i) {
            const float v = x.data_as<float>()[i];
            const float want = std::tanh(1.0f / (1.0f + std::exp(-std::exp(v)))) + std::max(0.0f, v);
            ASSERT_NEAR(outs[0].data_as<float>()[i], want, 1e-5) << "-O" << level << " element " << i;
        }
    }
}

}  // namespace
}  // namespace kiln::compiler
