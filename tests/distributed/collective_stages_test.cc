// The cut of a model at its collective ops (distributed/collective_stages.h) and the model's run
// outside MPI (distributed/collective_model.h with no communicator: each collective is the
// identity), against a plain C++ loop. The MPI runs are tests/distributed/test_collective_ops.py.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/graph_interpreter.h"
#include "distributed/collective_model.h"
#include "distributed/collective_stages.h"
#include "ir/parser.h"
#include "runtime/caching_allocator.h"
#include "runtime/thread_pool.h"

namespace kiln::distributed {
namespace {

// Wave 0: s (reads a, computed by stage 0) and t (reads the input). Stage 1: c = s + t.
// Wave 1: g (gathers c). Stage 2: out = Neg(g). A model output (a) leaves stage 0 directly.
constexpr const char* kTwoWaves = R"(
graph two_waves(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3] # name="a"
  %s = AllReduce(%a) {reduce="max"} : f32[2,3] # name="s"
  %t = AllReduce(%x) {reduce="sum"} : f32[2,3] # name="t"
  %c = Add(%s, %t) : f32[2,3] # name="c"
  %g = AllGather(%c) {axis=1, world_size=1} : f32[2,3] # name="g"
  %out = Neg(%g) : f32[2,3] # name="out"
  return %out, %a
}
)";

std::vector<std::string> names(const std::vector<ir::Value*>& vs) {
    std::vector<std::string> out;
    for (const ir::Value* v : vs) out.push_back(v->name());
    return out;
}

TEST(CollectiveStages, CutsIntoStagesAndWavesByCollectiveDepth) {
    ir::Graph g = ir::parse_graph(kTwoWaves);
    ASSERT_TRUE(has_collectives(g));
    CollectiveStages c = split_at_collectives(g);
    ASSERT_EQ(c.stages.size(), 3u);
    ASSERT_EQ(c.waves.size(), 2u);
    ASSERT_EQ(c.waves[0].size(), 2u);
    EXPECT_EQ(c.waves[0][0].name, "s");
    EXPECT_EQ(c.waves[0][0].reduce, ReduceOp::kMax);
    EXPECT_EQ(c.waves[0][1].input, "x");
    ASSERT_EQ(c.waves[1].size(), 1u);
    EXPECT_EQ(c.waves[1][0].op, "AllGather");
    EXPECT_EQ(c.waves[1][0].axis, 1);
    EXPECT_EQ(c.waves[1][0].world_size, 1);
    EXPECT_EQ(c.stages[0].num_nodes(), 1u);  // Relu
    EXPECT_EQ(names(c.stages[0].outputs()), (std::vector<std::string>{"a"}));
    EXPECT_EQ(names(c.stages[1].inputs()), (std::vector<std::string>{"s", "t"}));
    EXPECT_EQ(names(c.stages[1].outputs()), (std::vector<std::string>{"c"}));
    EXPECT_EQ(names(c.stages[2].inputs()), (std::vector<std::string>{"g"}));
    EXPECT_EQ(names(c.stages[2].outputs()), (std::vector<std::string>{"out"}));
    EXPECT_EQ(c.outputs, (std::vector<std::string>{"out", "a"}));
}

TEST(CollectiveStages, AModelWithoutCollectivesIsOneStage) {
    ir::Graph g = ir::parse_graph("graph one(%x: f32[2]) {\n  %y = Relu(%x) : f32[2]\n  return %y\n}\n");
    EXPECT_FALSE(has_collectives(g));
    CollectiveStages c = split_at_collectives(g);
    EXPECT_EQ(c.stages.size(), 1u);
    EXPECT_TRUE(c.waves.empty());
}

TEST(CollectiveModel, OutsideMpiEachCollectiveIsTheIdentity) {
    SessionOptions opts;
    opts.threads = 1;
    CollectiveModel m(ir::parse_graph(kTwoWaves), opts, nullptr);
    EXPECT_EQ(m.collective_nodes(), 3u);
    EXPECT_EQ(m.waves(), 2u);
    Tensor x(DType::kFloat32, {2, 3});
    for (int i = 0; i < 6; ++i) x.data_as<float>()[i] = static_cast<float>(i) - 2.5f;
    std::vector<Tensor> outs = m.run({{"x", x}});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(m.last_run_data_calls(), 0u);
    for (int i = 0; i < 6; ++i) {
        const float xi = x.data_as<float>()[i], relu = std::max(xi, 0.0f);
        EXPECT_EQ(outs[0].data_as<float>()[i], -(relu + xi)) << i;
        EXPECT_EQ(outs[1].data_as<float>()[i], relu) << i;
    }
}

TEST(CollectiveModel, AWorldSizeOtherThanOneOutsideMpiNamesTheNode) {
    const std::string text = R"(
graph g2(%x: f32[2]) {
  %g = AllGather(%x) {world_size=2} : f32[4] # name="gather_x"
  return %g
}
)";
    SessionOptions opts;
    opts.threads = 1;
    CollectiveModel m(ir::parse_graph(text), opts, nullptr);
    Tensor x(DType::kFloat32, {2});
    try {
        m.run({{"x", x}});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("AllGather node 'gather_x': world_size=2 in the model, but the job has 1"),
                  std::string::npos)
            << e.what();
    }
}

TEST(CollectiveModel, TheGraphInterpreterPointsACollectiveToCollectiveModel) {
    // What a Session does with such a model: it has no compute, so the interpreter refuses it.
    auto g = std::make_shared<ir::Graph>(
        ir::parse_graph("graph c(%x: f32[2]) {\n  %y = AllReduce(%x) : f32[2] # name=\"ar\"\n  return %y\n}\n"));
    runtime::ThreadPool pool(1);
    auto alloc = runtime::make_session_allocator(0);
    compiler::GraphInterpreter interp(g, &pool, alloc.get());
    try {
        interp.run({Datum(Tensor(DType::kFloat32, {2}))});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("a collective runs through distributed::CollectiveModel"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace kiln::distributed
