// Memory planning through compile(): in-place reuse counted on a Relu -> Sigmoid -> Tanh -> Relu
// chain, the plan checker on small graphs and the ONNX models at hand, concurrency-safe plans
// under the dataflow executor, and the OutOfMemory path of a session budget. References are
// naive loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "compiler/compile.h"
#include "compiler/plan_executable.h"
#include "frontend/onnx/importer.h"
#include "ir/graph.h"
#include "plan/plan_checker.h"
#include "runtime/caching_allocator.h"
#include "runtime/dataflow_executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/sequential_executor.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

ir::TensorType f32(std::vector<int64_t> s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

Tensor ramp(Shape s) {
    Tensor t(DType::kFloat32, std::move(s));
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = static_cast<float>(i % 97) / 24.0f - 2.0f;
    return t;
}

constexpr int64_t kN = 1024;  // 4096 bytes per tensor: a multiple of 64, so bytes == aligned bytes

// x -> Relu -> Sigmoid -> Tanh -> Relu -> y
ir::Graph chain_graph() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, kN}));
    ir::Value* v = x;
    const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Relu"};
    for (int i = 0; i < 4; ++i)
        v = g.add_node(ops[i], {v}, {}, {f32({1, kN})}, {std::string("t") + std::to_string(i)}, ops[i] + std::to_string(i))
                ->output(0);
    g.add_output(v);
    return g;
}

float chain_ref(float x) { return std::max(0.0f, std::tanh(1.0f / (1.0f + std::exp(-std::max(0.0f, x))))); }

void expect_chain_output(const Tensor& in, const Tensor& out) {
    ASSERT_EQ(out.numel(), kN);
    for (int64_t i = 0; i < kN; ++i)
        ASSERT_NEAR(out.data_as<float>()[i], chain_ref(in.data_as<float>()[i]), 1e-5) << "element " << i;
}

// These tests count per-node steps: -O0 keeps one kernel per node (at -O3 the chain fuses).
CompileOptions per_node() {
    CompileOptions o;
    o.opt_level = 0;
    return o;
}

TEST(MemoryPlanCompile, ElementwiseChainRunsInPlaceInOneTensor) {
    ir::Graph g = chain_graph();
    CompiledModel m = compile(g, per_node());
    // Intermediates t0, t1, t2 (t3 is the output): t1 in place of t0, t2 in place of t1.
    EXPECT_EQ(m.memory.inplace_steps, 2);
    EXPECT_EQ(m.memory.arena, static_cast<size_t>(kN) * 4);
    EXPECT_EQ(m.memory.naive_sum, 3u * kN * 4);
    EXPECT_EQ(m.executable->arena_bytes, static_cast<size_t>(kN) * 4);
    int planned = 0;
    for (const runtime::BufferDesc& b : m.executable->buffers)
        if (b.role == runtime::BufferRole::kIntermediate) {
            EXPECT_EQ(b.arena_offset, 0) << b.name;
            ++planned;
        }
    EXPECT_EQ(planned, 3);
    // In-place kernels are emitted without `restrict` on their parameters; the first Relu reads
    // the graph input, so it is offered in place too (the planner declines: inputs are pinned).
    EXPECT_EQ(m.kernels[1].c_source.find("* restrict"), std::string::npos) << m.kernels[1].c_source;
    // And the aliased kernels compute the right thing.
    auto pool = runtime::make_session_allocator(0);
    runtime::SequentialExecutor ex(m.executable, nullptr, pool.get());
    Tensor x = ramp({1, kN});
    std::vector<Tensor> outs;
    ASSERT_TRUE(ex.run({x}, outs).ok());
    expect_chain_output(x, outs[0]);
}

TEST(MemoryPlanCompile, BudgetOneByteShortFailsCleanlyAndTheExactPlanSucceeds) {
    ir::Graph g = chain_graph();
    CompiledModel m = compile(g, per_node());
    const size_t arena = m.memory.arena;
    const size_t out_bytes = static_cast<size_t>(kN) * 4;
    Tensor x = ramp({1, kN});
    std::vector<Tensor> outs;
    {
        // arena - 1: the arena itself is refused, named, with the budget and what is in use.
        auto pool = runtime::make_session_allocator(arena - 1);
        runtime::SequentialExecutor ex(m.executable, nullptr, pool.get());
        for (int attempt = 0; attempt < 2; ++attempt) {  // a refused run can be retried: same error
            Status st = ex.run({x}, outs);
            ASSERT_FALSE(st.ok());
            EXPECT_EQ(st.kind(), ErrorKind::kOutOfMemory);
            EXPECT_EQ(st.message(), "out of memory budget: allocating " + std::to_string(arena) +
                                        " bytes for 'arena for 3 model intermediates' with 0 bytes in use exceeds "
                                        "the budget of " + std::to_string(arena - 1) + " bytes");
            EXPECT_EQ(pool->bytes_in_use(), 0u);
        }
    }
    {
        // arena + one output - 1: the arena fits, the output tensor is refused by name.
        auto pool = runtime::make_session_allocator(arena + out_bytes - 1);
        runtime::SequentialExecutor ex(m.executable, nullptr, pool.get());
        Status st = ex.run({x}, outs);
        ASSERT_FALSE(st.ok());
        EXPECT_EQ(st.kind(), ErrorKind::kOutOfMemory);
        EXPECT_NE(st.message().find("for 't3'"), std::string::npos) << st.message();
    }
    // Exactly the planned arena + the output: succeeds, and keeps succeeding once each run's
    // output is dropped before the next (the output block comes back from the cache).
    auto pool = runtime::make_session_allocator(arena + out_bytes);
    runtime::SequentialExecutor ex(m.executable, nullptr, pool.get());
    ASSERT_TRUE(ex.run({x}, outs).ok());
    expect_chain_output(x, outs[0]);
    // Holding the previous output needs a second output block: over budget, a clean error.
    std::vector<Tensor> more;
    Status st = ex.run({x}, more);
    EXPECT_EQ(st.kind(), ErrorKind::kOutOfMemory);
    outs.clear();
    for (int r = 0; r < 3; ++r) {
        ASSERT_TRUE(ex.run({x}, outs).ok());
        expect_chain_output(x, outs[0]);
        outs.clear();
    }
    EXPECT_GE(pool->stats().hits, 3u);
    EXPECT_EQ(pool->stats().misses, 2u);  // the arena and the first output block
}

// Two branches joined at the end: x -> Relu -> Flatten -> a ; x -> Sigmoid -> Tanh -> b ;
// Relu(a + b). Flatten is not elementwise, so Relu's output dies at step 1 and, in step order,
// the Sigmoid output (step 2) may reuse it; concurrently, steps 0-1 and 2-3 may overlap.
ir::Graph diamond_graph() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, kN}));
    auto un = [&](const char* op, ir::Value* v, const std::string& name) {
        return g.add_node(op, {v}, {}, {f32({1, kN})}, {name}, name + "_node")->output(0);
    };
    ir::Value* a = un("Flatten", un("Relu", x, "ra"), "fa");
    ir::Value* b = un("Tanh", un("Sigmoid", x, "sb"), "tb");
    ir::Value* s = g.add_node("Add", {a, b}, {}, {f32({1, kN})}, {"sum"}, "add")->output(0);
    g.add_output(un("Relu", s, "y"));
    return g;
}

float diamond_ref(float x) {
    float a = std::max(0.0f, x);
    float b = std::tanh(1.0f / (1.0f + std::exp(-x)));
    return std::max(0.0f, a + b);
}

TEST(MemoryPlanCompile, ConcurrentPlanKeepsBranchesApartAndRunsUnderDataflow) {
    ir::Graph g1 = diamond_graph();
    CompiledModel seq = compile(g1, per_node());
    CompileOptions copts = per_node();
    copts.plan_for_concurrency = true;
    ir::Graph g2 = diamond_graph();
    CompiledModel con = compile(g2, copts);
    EXPECT_TRUE(con.executable->planned_for_concurrency);
    // Sequentially the branches reuse each other's memory; concurrently they may not.
    EXPECT_EQ(seq.memory.arena, 2u * kN * 4);
    EXPECT_EQ(con.memory.arena, 3u * kN * 4);
    runtime::ThreadPool intra(2);
    runtime::InterOpThreadPool inter(2);
    auto pool = runtime::make_session_allocator(0);
    runtime::DataflowExecutor ex(con.executable, &intra, &inter, pool.get());
    Tensor x = ramp({1, kN});
    for (int r = 0; r < 20; ++r) {
        std::vector<Tensor> outs;
        ASSERT_TRUE(ex.run({x}, outs).ok());
        for (int64_t i = 0; i < kN; ++i)
            ASSERT_NEAR(outs[0].data_as<float>()[i], diamond_ref(x.data_as<float>()[i]), 1e-4) << "run " << r;
    }
}

// The plan checker on the committed digits CNN and the generated test models (ctest's
// make_test_models writes them into the build directory first), both modes: compile() verifies
// every plan and throws kInternal on a violation; here the problem is rebuilt and checked once
// more explicitly. A missing model fails the test (REVIEW 15: it used to be skipped silently).
TEST(MemoryPlanCompile, PlanCheckerOnOnnxModels) {
    std::vector<std::string> models = {std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx"};
    const std::filesystem::path gen = std::filesystem::path(KILN_BINARY_DIR) / "test_models";
    for (const char* name : {"mlp", "small_cnn", "resnet_block", "two_input_mix", "inception", "two_tower", "bert_tiny"}) {
        const std::filesystem::path path = gen / (std::string(name) + ".onnx");
        ASSERT_TRUE(std::filesystem::exists(path))
            << path << " is missing: run the test through ctest (its make_test_models fixture writes it)";
        models.push_back(path.string());
    }
    for (const std::string& path : models) {
        for (bool concurrent : {false, true}) {
            ir::Graph g = frontend::import_onnx_file(path);
            CompileOptions opts;
            opts.plan_for_concurrency = concurrent;
            for (ir::Value* in : g.inputs())
                for (const ir::Dim& d : in->type().shape)
                    if (!d.is_static()) opts.dims[d.symbol] = 1;
            CompiledModel m;
            ASSERT_NO_THROW(m = compile(g, opts)) << path;
            ExecutablePlan again = plan_executable(*m.executable, {}, concurrent);
            EXPECT_TRUE(plan::check_plan(again.problem, again.plan).empty()) << path;
            EXPECT_LE(m.memory.lower_bound, m.memory.arena) << path;
            EXPECT_LE(m.memory.arena, m.memory.naive_sum + 64 * m.executable->buffers.size()) << path;
        }
    }
}

}  // namespace
}  // namespace kiln::compiler
