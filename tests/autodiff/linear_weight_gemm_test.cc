// A linear layer as PyTorch exports it, MatMul(X, Transpose(W)) + b with W a parameter, in the
// training graph (training_graph.cc: transposed_weights_to_gemm): one Gemm(X as rows, W,
// b, transB=1), no Transpose and no MatMul left in the forward or the backward, and the
// gradients of an MSE loss equal the closed form computed here in float64 (dY = 2 (Y - L) /
// numel; dW = dY^T X over all rows; db = the rows' sum of dY), for a batched [2, 3, 4] X and a
// plain [6, 4] one; without the bias Add the rewrite still applies.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "autodiff/training_graph.h"
#include "gradient_check.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::random_tensor;

void check(const Shape& xs, bool with_bias) {
    SCOPED_TRACE("X " + shape_str(xs) + (with_bias ? " with bias" : " no bias"));
    constexpr int64_t kOut = 5;
    const int64_t k = xs.back(), rows = shape_numel(xs) / k;
    const Tensor x = random_tensor(xs, -1, 1, 1), w = random_tensor({kOut, k}, -1, 1, 2);
    const Tensor b = random_tensor({kOut}, -1, 1, 3);
    Shape ys = xs;
    ys.back() = kOut;
    const Tensor labels = random_tensor(ys, -1, 1, 4);

    ir::Graph g;
    ir::Value* xv = g.add_input("x", ir::TensorType::of_static(DType::kFloat64, xs));
    ir::Value* wv = g.add_constant("W", w);
    ir::Value* wt = pass::add_inferred_node(g, "Transpose", {wv}, {{"perm", std::vector<int64_t>{1, 0}}})->output(0);
    ir::Value* y = pass::add_inferred_node(g, "MatMul", {xv, wt})->output(0);
    ModelState state{{"W"}, {}};
    if (with_bias) {
        y = pass::add_inferred_node(g, "Add", {y, g.add_constant("b", b)})->output(0);
        state.params.push_back("b");
    }
    g.set_outputs({y});
    LossSpec loss;
    loss.kind = "mse";
    TrainingGraph t = build_training_graph(std::move(g), state, loss, OptimizerSpec{}, TrainingGraphKind::kGradients);
    int gemms = 0;
    for (const ir::Node* n : t.graph.nodes()) {
        EXPECT_NE(n->op(), "Transpose") << "node " << n->name();
        EXPECT_NE(n->op(), "MatMul") << "node " << n->name();
        gemms += n->op() == "Gemm";
    }
    EXPECT_EQ(gemms, 2) << "forward Y and dW (dX is not asked for)";

    const std::map<std::string, Tensor> feed = {{"x", x}, {"W", w}, {"b", b}, {"labels", labels}};
    std::vector<Tensor> ins;
    for (const ir::Value* v : t.graph.inputs()) ins.push_back(feed.at(v->name()));
    const std::vector<Tensor> outs = kiln::testing::run_graph(t.graph, ins);
    std::map<std::string, Tensor> got;
    for (size_t i = 0; i < outs.size(); ++i) got[t.outputs[i]] = outs[i];

    std::vector<double> dy(static_cast<size_t>(rows * kOut));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < kOut; ++o) {
            double v = with_bias ? b.get_f64(o) : 0.0;
            for (int64_t i = 0; i < k; ++i) v += x.get_f64(r * k + i) * w.get_f64(o * k + i);
            dy[r * kOut + o] = 2 * (v - labels.get_f64(r * kOut + o)) / static_cast<double>(rows * kOut);
        }
    const Tensor& dw = got.at("grad:W");
    ASSERT_EQ(dw.shape(), Shape({kOut, k}));
    for (int64_t o = 0; o < kOut; ++o)
        for (int64_t i = 0; i < k; ++i) {
            double want = 0;
            for (int64_t r = 0; r < rows; ++r) want += dy[r * kOut + o] * x.get_f64(r * k + i);
            EXPECT_NEAR(dw.get_f64(o * k + i), want, 1e-12) << "dW[" << o << ", " << i << "]";
        }
    if (!with_bias) return;
    const Tensor& db = got.at("grad:b");
    for (int64_t o = 0; o < kOut; ++o) {
        double want = 0;
        for (int64_t r = 0; r < rows; ++r) want += dy[r * kOut + o];
        EXPECT_NEAR(db.get_f64(o), want, 1e-12) << "db[" << o << "]";
    }
}

TEST(LinearWeightGemm, TransposedWeightBecomesOneGemmWithExactGradients) {
    check({2, 3, 4}, true);
    check({6, 4}, true);
    check({2, 3, 4}, false);
}

}  // namespace
}  // namespace kiln::autodiff
