// pack_matmul_weights: which MatMul/Gemm nodes are rewritten, and the folded packed B against
// the packing formula Bp[jb, k, jj] = B'[k, jb*nb + jj] written here (B' = B or B^T).
// Numerics of KilnMatMulPackedB end to end: tests/models/test_packed_matmul_vs_numpy.py.
#include "pass/pack_matmul_weights.h"

#include "op/defs/linear_util.h"
#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass/rewrite.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

Tensor weights(Shape s) {
    Tensor w(DType::kFloat32, s);
    for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i % 89) - 40);
    return w;
}

const ir::Node* only(const ir::Graph& g, const std::string& op) {
    const ir::Node* found = nullptr;
    for (const ir::Node* n : g.nodes())
        if (n->op() == op) {
            EXPECT_EQ(found, nullptr) << "two " << op << " nodes";
            found = n;
        }
    return found;
}

/// Runs the pass, folds the packing and checks Bp against B' (k x n, read by bt(k, j)).
template <class BT>
void expect_packed(ir::Graph& g, int64_t m, int64_t k, int64_t n, BT bt) {
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(pack_matmul_weights(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
    EXPECT_EQ(only(g, "MatMul"), nullptr);
    EXPECT_EQ(only(g, "Gemm"), nullptr);
    const ir::Node* p = only(g, "KilnMatMulPackedB");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->attr_int("n", 0), n);
    ASSERT_TRUE(p->input(1)->is_constant()) << "the packing was not folded";
    const int64_t nb = op::matmul_packed_block(m, n);
    const int64_t blocks = (n + nb - 1) / nb;  // the last one padded with zero columns
    const Tensor& bp = p->input(1)->constant();
    ASSERT_EQ(bp.shape(), Shape({blocks, k, nb}));
    for (int64_t jb = 0; jb < blocks; ++jb)
        for (int64_t kk = 0; kk < k; ++kk)
            for (int64_t jj = 0; jj < nb; ++jj) {
                const int64_t j = jb * nb + jj;
                ASSERT_EQ(bp.get_f64((jb * k + kk) * nb + jj), j < n ? bt(kk, j) : 0.0) << jb << " " << kk << " " << jj;
            }
}

TEST(PackMatmulWeights, MatMulWithConstantBIsPackedAndKeepsBatchDims) {
    const int64_t k = 8, n = 40;
    Tensor w = weights({k, n});
    ir::Graph g;
    ir::Value* a = g.add_input("a", ir::TensorType::of_static(DType::kFloat32, {2, 5, k}));
    ir::Node* mm = add_inferred_node(g, "MatMul", {a, g.add_constant("w", w)});
    g.add_output(mm->output(0));
    expect_packed(g, 5, k, n, [&](int64_t kk, int64_t j) { return w.get_f64(kk * n + j); });
    EXPECT_EQ(g.outputs()[0]->type().static_shape(), Shape({2, 5, n}));
}

TEST(PackMatmulWeights, PreemptibleCompilesKeepPanelsUnder384KB) {
    // BERT-base's FFN output projection: K = 3072, 64-wide panels are 768 KB; 32-wide 384 KB.
    EXPECT_EQ(op::matmul_packed_block(128, 768), 64);
    EXPECT_EQ(op::preemptible_packed_block(64, 3072), 32);
    EXPECT_EQ(op::preemptible_packed_block(64, 768), 64);     // 192 KB: kept
    EXPECT_EQ(op::preemptible_packed_block(64, 100000), 16);  // never below one vector
    EXPECT_EQ(op::preemptible_packed_block(40, 100000), 40);  // N itself (one block): kept
    const int64_t m = 128, k = 3072, n = 768;
    Tensor w = weights({k, n});
    ir::Graph g;
    ir::Value* a = g.add_input("a", ir::TensorType::of_static(DType::kFloat32, {m, k}));
    g.add_output(add_inferred_node(g, "MatMul", {a, g.add_constant("w", w)})->output(0));
    PassContext ctx = compiler::pass_context();
    ctx.preemptible = true;
    ASSERT_TRUE(pack_matmul_weights(g, ctx));
    fold_constants(g, ctx);
    const ir::Node* p = only(g, "KilnMatMulPackedB");
    ASSERT_NE(p, nullptr);
    const Tensor& bp = p->input(1)->constant();
    ASSERT_EQ(bp.shape(), Shape({n / 32, k, 32}));
    for (int64_t kk : {int64_t{0}, k - 1})
        for (int64_t j : {int64_t{0}, int64_t{33}, n - 1})
            EXPECT_EQ(bp.get_f64((j / 32 * k + kk) * 32 + j % 32), w.get_f64(kk * n + j)) << kk << " " << j;
}

TEST(PackMatmulWeights, GemmTransBIsPackedWithAlphaBetaAndC) {
    const int64_t m = 6, k = 12, n = 32;
    Tensor w = weights({n, k});  // transB: B is [N, K]
    ir::Graph g;
    ir::Value* a = g.add_input("a", ir::TensorType::of_static(DType::kFloat32, {m, k}));
    ir::Value* c = g.add_input("c", ir::TensorType::of_static(DType::kFloat32, {n}));
    ir::Node* gm = add_inferred_node(g, "Gemm", {a, g.add_constant("w", w), c},
                                     {{"transB", ir::Attr(int64_t{1})}, {"alpha", ir::Attr(0.5)}, {"beta", ir::Attr(2.0)}});
    g.add_output(gm->output(0));
    expect_packed(g, m, k, n, [&](int64_t kk, int64_t j) { return w.get_f64(j * k + kk); });
    if (HasFatalFailure()) return;
    const ir::Node* p = only(g, "KilnMatMulPackedB");
    EXPECT_EQ(p->attr_float("alpha", 0), 0.5);
    EXPECT_EQ(p->attr_float("beta", 0), 2.0);
    EXPECT_EQ(p->input(2), c);
}

// One row (a classifier after global pooling): the block is the GEMV tile's 4 vectors even
// though it does not divide N, so B' is padded to whole blocks (N=100 -> 2 blocks of 64).
TEST(PackMatmulWeights, SingleRowPadsTheLastBlock) {
    const int64_t k = 8, n = 100;
    ASSERT_EQ(op::matmul_packed_block(1, n), 64);
    for (int64_t tb : {0, 1}) {
        Tensor w = weights(tb ? Shape{n, k} : Shape{k, n});
        ir::Graph g;
        ir::Value* a = g.add_input("a", ir::TensorType::of_static(DType::kFloat32, {1, k}));
        ir::Node* gm = add_inferred_node(g, "Gemm", {a, g.add_constant("w", w)}, {{"transB", ir::Attr(tb)}});
        g.add_output(gm->output(0));
        expect_packed(g, 1, k, n, [&](int64_t kk, int64_t j) { return w.get_f64(tb ? j * k + kk : kk * n + j); });
        EXPECT_EQ(g.outputs()[0]->type().static_shape(), Shape({1, n}));
    }
}

TEST(PackMatmulWeights, ActivationsTransAAndTinyAreLeftAlone) {
    const std::string text = R"(
graph g(%a: f32[16,16], %b: f32[16,16], %t: f32[16,16]) {
  const %w: f32[16,2] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
  %x = MatMul(%a, %b) : f32[16,16]
  %y = Gemm(%t, %b) {transA=1} : f32[16,16]
  %z = MatMul(%a, %w) : f32[16,2]
  return %x, %y, %z
})";
    EXPECT_PASS_GIVES(pack_matmul_weights, text, text);
}

}  // namespace
}  // namespace kiln::pass
