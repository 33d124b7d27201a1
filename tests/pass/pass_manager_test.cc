// The pass manager and the pipeline: levels, print-after, per-pass records, and the typed
// verifier catching a pass that breaks the graph (it names the pass).
#include "pass/pass_manager.h"

#include "pass/pipeline.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

const char* kNet = R"(
graph g(%x: f32[1,2,4,4]) {
  const %w: f32[2,2,1,1] = [1, 0, 0, 1]
  const %one: f32[] = [1]
  %c = Conv(%x, %w) : f32[1,2,4,4]
  %m = Mul(%c, %one) : f32[1,2,4,4]
  %y = Relu(%m) : f32[1,2,4,4]
  return %y
})";

std::vector<std::string> names(const std::vector<Pass>& ps) {
    std::vector<std::string> out;
    for (const Pass& p : ps) out.push_back(p.name);
    return out;
}

TEST(Pipeline, LevelsGrowAndO0OnlyInfers) {
    EXPECT_EQ(names(passes_for_level(0)), std::vector<std::string>{"infer-shapes"});
    size_t prev = 0;
    for (int o = 0; o <= kMaxOptLevel; ++o) {
        EXPECT_GE(passes_for_level(o).size(), prev);
        prev = passes_for_level(o).size();
    }
    EXPECT_EQ(names(passes_for_level(3)).back(), "fuse-operators");
    EXPECT_THROW(passes_for_level(4), Error);
}

TEST(PassManager, RunsRecordsAndPrintsAfter) {
    ir::Graph g = ir::parse_graph(kNet);
    PassManagerOptions opts;
    opts.verify_each = true;
    opts.print_after = {"simplify-algebra"};
    std::vector<std::string> printed;
    std::string after_simplify;
    opts.print = [&](const std::string& p, const ir::Graph& graph) {
        printed.push_back(p);
        after_simplify = testing::canonical(graph);
    };
    std::vector<PassRecord> recs = run_passes(g, passes_for_level(3), compiler::pass_context(), opts);
    EXPECT_EQ(printed, std::vector<std::string>{"simplify-algebra"});
    EXPECT_EQ(after_simplify.find("Mul"), std::string::npos) << after_simplify;
    ASSERT_EQ(recs.size(), passes_for_level(3).size());
    EXPECT_EQ(recs[0].nodes_before, 3u);
    EXPECT_EQ(recs.back().nodes_after, 2u);
    EXPECT_NE(pass_records_str(recs).find("fuse-operators"), std::string::npos);
    // Conv + Relu: one group.
    for (const ir::Node* n : g.nodes()) EXPECT_EQ(n->group(), 0) << n->describe();

    ir::Graph h = ir::parse_graph(kNet);
    opts.print_after_all = true;
    printed.clear();
    run_passes(h, passes_for_level(3), compiler::pass_context(), opts);
    EXPECT_EQ(printed.size(), passes_for_level(3).size());
}

TEST(PassManager, VerifierNamesThePassThatBrokeTheGraph) {
    ir::Graph g = ir::parse_graph(kNet);
    Pass bad{"break-types", 0, "sets a wrong type", [](ir::Graph& graph, const PassContext&) {
                 graph.nodes().back()->output(0)->set_type(ir::TensorType::of_static(DType::kFloat32, {3}));
                 return true;
             }};
    PassManagerOptions opts;
    opts.verify_each = true;
    try {
        run_passes(g, {bad}, compiler::pass_context(), opts);
        FAIL() << "expected the verifier to fail";
    } catch (const Error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("after pass break-types"), std::string::npos) << what;
        EXPECT_NE(what.find("f32[3]"), std::string::npos) << what;
    }
}

TEST(VerifyTyped, RejectsANonConvexGroup) {
    // a and c in one group, b outside between them: a -> b -> c.
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[4]) {
  %a = Neg(%x) : f32[4] # group=0
  %b = Softmax(%a) : f32[4]
  %c = Add(%a, %b) : f32[4] # group=0
  return %c
})");
    EXPECT_THROW(verify_typed_graph(g), Error);
    g.nodes()[2]->set_group(-1);
    EXPECT_NO_THROW(verify_typed_graph(g));
}

}  // namespace
}  // namespace kiln::pass
