// fold_constants, eliminate_dead_code, eliminate_common_subexpressions, infer_shapes:
// before/after IR. Folded values are checked against numbers worked out by hand from the ops'
// definitions (an independent reference).
#include "pass/eliminate_common_subexpressions.h"
#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass/infer_shapes.h"
#include "pass/rewrite.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

TEST(FoldConstants, EvaluatesAndPropagates) {
    EXPECT_PASS_GIVES(fold_constants, R"(
graph g(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  const %b: f32[2] = [3, 5]
  %s = Add(%a, %b) : f32[2]
  %t = Mul(%s, %s) : f32[2]
  %y = Add(%x, %t) : f32[2]
  return %y
})", R"(
graph g(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  const %b: f32[2] = [3, 5]
  const %t: f32[2] = [16, 49]
  %y = Add(%x, %t) : f32[2]
  return %y
})");
}

TEST(FoldConstants, DoesNotDuplicateALargeWeight) {
    // Transpose(w) is as large as w, and w has another user: folding would keep both copies.
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {80, 80}));
    ir::Value* w = g.add_constant("w", Tensor(DType::kFloat32, {80, 80}));
    auto t = ir::TensorType::of_static(DType::kFloat32, {80, 80});
    ir::Node* tr = g.add_node("Transpose", {w}, {}, {t});
    ir::Node* a = g.add_node("MatMul", {x, tr->output(0)}, {}, {t});
    ir::Node* y = g.add_node("MatMul", {a->output(0), w}, {}, {t});
    g.add_output(y->output(0));
    EXPECT_FALSE(fold_constants(g, compiler::pass_context()));
    EXPECT_EQ(g.num_nodes(), 3u);
    // Once w has no other user, folding frees as much as it makes: it folds.
    y->set_input(1, a->output(0));
    EXPECT_TRUE(fold_constants(g, compiler::pass_context()));
    EXPECT_EQ(g.num_nodes(), 2u);
}

// Large folds run as compiled kernels, a wave of them built together (PassContext::evaluate_all):
// two transposed weights and a product of one of them, folded in two waves, against the
// transpose and the product written out here, and against folding node by node.
TEST(FoldConstants, WavesOfCompiledFoldsMatchTheOpsAndNodeByNode) {
    const int64_t n = 200;  // 40000 elements: above kCompiledFoldElements
    auto build = [&](ir::Graph& g) {
        ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {n, n}));
        auto t = ir::TensorType::of_static(DType::kFloat32, {n, n});
        ir::Value* outs = x;
        for (int k = 0; k < 2; ++k) {
            Tensor w(DType::kFloat32, {n, n});
            for (int64_t e = 0; e < n * n; ++e) w.data_as<float>()[e] = static_cast<float>((e * (k + 3)) % 101) - 50.0f;
            ir::Value* wv = g.add_constant("w" + std::to_string(k), w);
            // A Transpose (computed on the host, host_folds.h), then a Neg and a Max compiled in
            // the waves after it.
            ir::Node* tr = g.add_node("Transpose", {wv}, {{"perm", ir::Attr(std::vector<int64_t>{1, 0})}}, {t});
            ir::Value* folded = g.add_node("Neg", {tr->output(0)}, {}, {t})->output(0);
            if (k == 1) folded = g.add_node("Max", {folded, folded}, {}, {t})->output(0);  // the third wave
            outs = g.add_node("Add", {outs, folded}, {}, {t})->output(0);
        }
        g.add_output(outs);
    };
    ir::Graph waves, single;
    build(waves);
    build(single);
    PassContext by_node = compiler::pass_context();
    by_node.evaluate_all = nullptr;
    EXPECT_TRUE(fold_constants(waves, compiler::pass_context()));
    EXPECT_TRUE(fold_constants(single, by_node));
    std::vector<const Tensor*> got, ref;
    for (const ir::Node* node : waves.nodes()) {
        ASSERT_EQ(node->op(), "Add");
        got.push_back(&node->input(1)->constant());
    }
    for (const ir::Node* node : single.nodes()) ref.push_back(&node->input(1)->constant());
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(ref.size(), 2u);
    for (int k = 0; k < 2; ++k)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const float w = static_cast<float>(((j * n + i) * (k + 3)) % 101) - 50.0f;  // w[j, i]
                const float want = -w;
                ASSERT_EQ(got[k]->data_as<float>()[i * n + j], want) << k << " " << i << " " << j;
                ASSERT_EQ(ref[k]->data_as<float>()[i * n + j], want) << k << " " << i << " " << j;
            }
}

// A Reshape of a constant folds as the runtime runs it, a view: the constant's bytes under the
// new shape, whatever its size (no kernel to compile), and its consumer folds after it.
TEST(FoldConstants, AReshapeOfAConstantIsItsBytesUnderTheNewShape) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {300, 200}));
    Tensor w(DType::kFloat32, {200, 300});
    for (int64_t e = 0; e < w.numel(); ++e) w.data_as<float>()[e] = static_cast<float>(e % 97) - 48.0f;
    ir::Value* wv = g.add_constant("w", w);
    auto flat = ir::TensorType::of_static(DType::kFloat32, {300, 200});
    Tensor target(DType::kInt64, {2});
    target.set_i64(0, 300);
    target.set_i64(1, 200);
    ir::Value* shape = g.add_constant("shape", target);
    ir::Node* r = g.add_node("Reshape", {wv, shape}, {}, {flat});
    ir::Node* m = g.add_node("Mul", {r->output(0), r->output(0)}, {}, {flat});
    g.add_output(g.add_node("Add", {x, m->output(0)}, {}, {flat})->output(0));
    EXPECT_TRUE(fold_constants(g, compiler::pass_context()));
    ASSERT_EQ(g.num_nodes(), 1u);
    const Tensor& got = g.nodes().front()->input(1)->constant();
    ASSERT_EQ(got.shape(), Shape({300, 200}));
    for (int64_t e = 0; e < got.numel(); ++e) {
        const float v = static_cast<float>(e % 97) - 48.0f;  // row-major: element e of w, reshaped
        ASSERT_EQ(got.data_as<float>()[e], v * v) << e;
    }
}

TEST(EliminateDeadCode, DropsDeadChainsAndConstants) {
    EXPECT_PASS_GIVES(eliminate_dead_code, R"(
graph g(%x: f32[2]) {
  const %c: f32[2] = [1, 2]
  const %unused: f32[] = [3]
  %a = Add(%x, %c) : f32[2]
  %b = Relu(%a) : f32[2]
  %y = Neg(%x) : f32[2]
  return %y
})", R"(
graph g(%x: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
})");
    // The canonical text lists only the constants nodes read: the dead ones must be gone too.
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[2]) {
  const %c: f32[2] = [1, 2]
  const %unused: f32[] = [3]
  %a = Add(%x, %c) : f32[2]
  %y = Neg(%x) : f32[2]
  return %y
})");
    eliminate_dead_code(g, compiler::pass_context());
    EXPECT_TRUE(g.constants().empty()) << g.constants().size() << " constants left";
}

TEST(EliminateCommonSubexpressions, MergesEqualNodesAndConstants) {
    EXPECT_PASS_GIVES(eliminate_common_subexpressions, R"(
graph g(%x: f32[2,3]) {
  const %ax1: i64[1] = [0]
  const %ax2: i64[1] = [0]
  %a = Unsqueeze(%x, %ax1) : f32[1,2,3]
  %b = Unsqueeze(%x, %ax2) : f32[1,2,3]
  %c = Softmax(%x) {axis=1} : f32[2,3]
  %d = Softmax(%x) {axis=0} : f32[2,3]
  %y = Add(%a, %b) : f32[1,2,3]
  %z = Sub(%c, %d) : f32[2,3]
  return %y, %z
})", R"(
graph g(%x: f32[2,3]) {
  const %ax1: i64[1] = [0]
  %a = Unsqueeze(%x, %ax1) : f32[1,2,3]
  %c = Softmax(%x) {axis=1} : f32[2,3]
  %d = Softmax(%x) {axis=0} : f32[2,3]
  %y = Add(%a, %a) : f32[1,2,3]
  %z = Sub(%c, %d) : f32[2,3]
  return %y, %z
})");
}

// A recomputation is told by its role, never by its name: an imported node that happens to be
// called "recompute/..." is merged like any other, a node the recomputation made is kept apart.
TEST(EliminateCommonSubexpressions, KeepsRecomputationsApartByRoleNotByName) {
    const char* text = R"(
graph g(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %y = Add(%a, %b) : f32[2,3]
  return %y
})";
    auto relus = [](const ir::Graph& g) {
        int n = 0;
        for (const ir::Node* node : g.nodes()) n += node->op() == "Relu";
        return n;
    };
    for (bool made_by_recompute : {false, true}) {
        ir::Graph g = ir::parse_graph(text);
        for (ir::Node* n : g.nodes())
            if (n->op() == "Relu") n->set_name(std::string(kRecomputePrefix) + n->output(0)->name());
        if (made_by_recompute) g.find_value("b")->producer()->set_role(ir::NodeRole::kRecompute);
        eliminate_common_subexpressions(g, compiler::pass_context());
        EXPECT_EQ(relus(g), made_by_recompute ? 2 : 1) << (made_by_recompute ? "a recomputation" : "a name");
    }
}

TEST(InferShapes, ShapeArithmeticMakesTheReshapeTargetStatic) {
    // The exporter pattern: Reshape(x, Concat(Gather(Shape(x), 0), [-1])).
    EXPECT_PASS_GIVES(infer_shapes, R"(
graph g(%x: f32[2,3,4]) {
  const %i0: i64[] = [0]
  const %m1: i64[1] = [-1]
  const %ax: i64[1] = [0]
  %s = Shape(%x) : i64[3]
  %n = Gather(%s, %i0) : i64[]
  %n1 = Unsqueeze(%n, %ax) : i64[1]
  %target = Concat(%n1, %m1) {axis=0} : i64[2]
  %y = Reshape(%x, %target) : f32[A,B]
  return %y
})", R"(
graph g(%x: f32[2,3,4]) {
  const %target: i64[2] = [2, -1]
  %y = Reshape(%x, %target) : f32[2,12]
  return %y
})");
}

TEST(InferShapes, NonConstantShapeOperandIsAnError) {
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[6], %s: i64[2]) {
  %y = Reshape(%x, %s) : f32[2,3]
  return %y
})");
    try {
        infer_shapes(g, compiler::pass_context());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("must be a constant"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kiln::pass

namespace kiln::pass {
namespace {

TEST(EliminateDeadCode, DropsUnusedTrailingOutputs) {
    // MaxPool's Indices and Dropout's mask are unused: the nodes lose those outputs.
    EXPECT_PASS_GIVES(eliminate_dead_code, R"(
graph g(%x: f32[1,1,4,4]) {
  %p, %idx = MaxPool(%x) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,2,2], i64[1,1,2,2]
  %d, %mask = Dropout(%p) : f32[1,1,2,2], bool[1,1,2,2]
  %y = Relu(%d) : f32[1,1,2,2]
  return %y
})", R"(
graph g(%x: f32[1,1,4,4]) {
  %p = MaxPool(%x) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,2,2]
  %d = Dropout(%p) : f32[1,1,2,2]
  %y = Relu(%d) : f32[1,1,2,2]
  return %y
})");
}

TEST(EliminateDeadCode, KeepsEverySplitOutput) {
    // Split's output count is its meaning: without its last (unused) part, the equal split of
    // 6 would be into two parts of 3, not three of 2.
    const char* g = R"(
graph g(%x: f32[6]) {
  %a, %b, %c = Split(%x) {num_outputs=3} : f32[2], f32[2], f32[2]
  %y = Add(%a, %b) : f32[2]
  return %y
})";
    EXPECT_PASS_GIVES(eliminate_dead_code, g, g);
}

}  // namespace
}  // namespace kiln::pass
