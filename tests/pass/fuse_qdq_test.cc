// fuse_qdq: the QDQ sandwich of ONNX Runtime's quantizer becomes QLinearConv (the bias back in
// int32, the numbers written here) or QLinearMatMul (per-column B), a Relu becomes nothing or
// Max(y, y_zp), a MaxPool between equal QDQ pairs runs on the 8-bit tensor, and what the pass
// cannot prove equal is left alone.
#include "pass/fuse_qdq.h"

#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

/// A QDQ conv as quantize_static writes it: u8 activations, s8 per-channel weights, the bias as
/// DequantizeLinear(int32, x_s * w_s).
std::string qdq_conv(const std::string& tail, const std::string& y_zp = "0") {
    return R"(
graph g(%xq: u8[1,1,4,4]) {
  const %xs: f32[] = [0.5]
  const %xz: u8[] = [3]
  const %wq: i8[2,1,1,1] = [5, -7]
  const %ws: f32[2] = [0.25, 0.125]
  const %wz: i8[2] = [0, 0]
  const %bq: i32[2] = [40, -9]
  const %bs: f32[2] = [0.125, 0.0625]
  const %ys: f32[] = [2]
  const %yz: u8[] = [)" + y_zp + R"(]
  %x = DequantizeLinear(%xq, %xs, %xz) : f32[1,1,4,4]
  %w = DequantizeLinear(%wq, %ws, %wz) {axis=0} : f32[2,1,1,1]
  %b = DequantizeLinear(%bq, %bs) {axis=0} : f32[2]
  %c = Conv(%x, %w, %b) : f32[1,2,4,4]
)" + tail + "}";
}

void fuse_and_fold(ir::Graph& g) {
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(fuse_qdq(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
}

TEST(FuseQdq, ConvSandwichBecomesQLinearConvWithInt32Bias) {
    ir::Graph g = ir::parse_graph(qdq_conv("  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,4]\n  return %y\n"));
    fuse_and_fold(g);
    ASSERT_EQ(g.num_nodes(), 1u);
    ir::Node* q = g.nodes()[0];
    EXPECT_EQ(q->op(), "QLinearConv");
    EXPECT_EQ(q->output(0)->name(), "y");
    EXPECT_EQ(q->input(0)->name(), "xq");
    ASSERT_EQ(q->num_inputs(), 9u);
    const Tensor& bias = q->input(8)->constant();
    ASSERT_EQ(bias.dtype(), DType::kInt32);
    EXPECT_EQ(bias.get_i64(0), 40);  // B / (x_s * w_s) = (40 * 0.125) / (0.5 * 0.25)
    EXPECT_EQ(bias.get_i64(1), -9);
    EXPECT_EQ(q->input(3)->constant().get_i64(1), -7);  // the int8 weights themselves
}

TEST(FuseQdq, ReluIsSaturationAtZeroPointZeroAndMaxOtherwise) {
    const std::string relu = "  %r = Relu(%c) : f32[1,2,4,4]\n  %y = QuantizeLinear(%r, %ys, %yz) : u8[1,2,4,4]\n  return %y\n";
    ir::Graph g = ir::parse_graph(qdq_conv(relu, "0"));
    fuse_and_fold(g);
    ASSERT_EQ(g.num_nodes(), 1u);  // u8 with y_zp 0: rounding saturates at 0 already
    EXPECT_EQ(g.nodes()[0]->op(), "QLinearConv");
    ir::Graph h = ir::parse_graph(qdq_conv(relu, "10"));
    fuse_and_fold(h);
    ASSERT_EQ(h.num_nodes(), 2u);
    EXPECT_EQ(h.nodes()[0]->op(), "QLinearConv");
    EXPECT_EQ(h.nodes()[1]->op(), "Max");  // Q(relu(v)) = max(Q(v), y_zp)
    EXPECT_EQ(h.nodes()[1]->input(1)->constant().get_i64(0), 10);
}

TEST(FuseQdq, LeavesRuntimeWeightsAndSharedConvAlone) {
    // Weights computed at run time (a graph input): no int8 weights to reorder once.
    std::string runtime_w = qdq_conv("  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,4]\n  return %y\n");
    runtime_w.replace(runtime_w.find("  const %wq: i8[2,1,1,1] = [5, -7]\n"), 35, "");
    runtime_w.replace(runtime_w.find("%xq: u8[1,1,4,4])"), 17, "%xq: u8[1,1,4,4], %wq: i8[2,1,1,1])");
    EXPECT_PASS_GIVES(fuse_qdq, runtime_w, runtime_w);
    // The float conv result is also a graph output: it must stay.
    const std::string shared = qdq_conv("  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,4]\n  return %y, %c\n");
    EXPECT_PASS_GIVES(fuse_qdq, shared, shared);
}

TEST(FuseQdq, MatMulSandwichBecomesQLinearMatMulPerColumn) {
    const char* text = R"(
graph g(%aq: u8[3,4]) {
  const %as: f32[] = [0.5]
  const %az: u8[] = [3]
  const %bq: i8[4,2] = [1, -2, 3, -4, 5, -6, 7, -8]
  const %bs: f32[2] = [0.25, 0.125]
  const %bz: i8[2] = [0, 0]
  const %ys: f32[] = [2]
  const %yz: u8[] = [7]
  %a = DequantizeLinear(%aq, %as, %az) : f32[3,4]
  %b = DequantizeLinear(%bq, %bs, %bz) {axis=1} : f32[4,2]
  %m = MatMul(%a, %b) : f32[3,2]
  %y = QuantizeLinear(%m, %ys, %yz) : u8[3,2]
  return %y
})";
    ir::Graph g = ir::parse_graph(text);
    fuse_and_fold(g);
    ASSERT_EQ(g.num_nodes(), 1u);
    ir::Node* q = g.nodes()[0];
    EXPECT_EQ(q->op(), "QLinearMatMul");
    EXPECT_EQ(q->input(0)->name(), "aq");
    EXPECT_EQ(q->input(3)->constant().get_i64(7), -8);
    EXPECT_EQ(q->input(4)->constant().numel(), 2);  // per column of B
    EXPECT_EQ(q->input(7)->constant().get_i64(0), 7);
    // Per-row scales of B (axis 0) are not per output column: left alone.
    std::string rows = text;
    rows.replace(rows.find("{axis=1}"), 8, "{axis=0}");
    rows.replace(rows.find("%bs: f32[2] = [0.25, 0.125]"), 27, "%bs: f32[4] = [0.25, 0.125, 1, 2]");
    rows.replace(rows.find("%bz: i8[2] = [0, 0]"), 19, "%bz: i8[4] = [0, 0, 0, 0]");
    EXPECT_PASS_GIVES(fuse_qdq, rows, rows);
}

TEST(FuseQdq, MaxPoolBetweenEqualQdqPairsRunsOnBytes) {
    const char* text = R"(
graph g(%xq: u8[1,1,4,4]) {
  const %s: f32[] = [0.5]
  const %z: u8[] = [3]
  const %s2: f32[] = [0.25]
  %x = DequantizeLinear(%xq, %s, %z) : f32[1,1,4,4]
  %p = MaxPool(%x) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,2,2]
  %y = QuantizeLinear(%p, %s, %z) : u8[1,1,2,2]
  %p2 = MaxPool(%x) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,2,2]
  %y2 = QuantizeLinear(%p2, %s2, %z) : u8[1,1,2,2]
  return %y, %y2
})";
    ir::Graph g = ir::parse_graph(text);
    fuse_and_fold(g);
    int byte_pools = 0, float_pools = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "MaxPool") continue;
        (n->input(0)->type().dtype == DType::kUInt8 ? byte_pools : float_pools) += 1;
    }
    EXPECT_EQ(byte_pools, 1);   // y: the same scale and zero point on both sides
    EXPECT_EQ(float_pools, 1);  // y2: another scale, left alone
}

}  // namespace
}  // namespace kiln::pass

namespace kiln::pass {
namespace {

/// A QDQ Gemm as quantize_static writes a Linear layer: W [N, K] (transB) per output channel,
/// the bias DequantizeLinear(int32, x_s * w_s); its result read by a float op, not quantized.
const char* kQdqGemm = R"(
graph g(%xq: u8[3,2]) {
  const %xs: f32[] = [0.5]
  const %xz: u8[] = [3]
  const %wq: i8[2,2] = [5, -7, 2, 4]
  const %ws: f32[2] = [0.25, 0.125]
  const %wz: i8[2] = [0, 0]
  const %bq: i32[2] = [40, -9]
  const %bs: f32[2] = [0.125, 0.0625]
  %x = DequantizeLinear(%xq, %xs, %xz) : f32[3,2]
  %w = DequantizeLinear(%wq, %ws, %wz) {axis=0} : f32[2,2]
  %b = DequantizeLinear(%bq, %bs) {axis=0} : f32[2]
  %y = Gemm(%x, %w, %b) {transB=1} : f32[3,2]
  %t = Tanh(%y) : f32[3,2]
  return %t
}
)";

TEST(FuseQdq, GemmBecomesMatMulIntegerWithScaleAndBias) {
    ir::Graph g = ir::parse_graph(kQdqGemm);
    fuse_and_fold(g);
    std::vector<std::string> ops;
    for (const ir::Node* n : g.nodes()) ops.push_back(n->op());
    ASSERT_EQ(ops, (std::vector<std::string>{"MatMulInteger", "Cast", "Mul", "Add", "Tanh"}));
    const ir::Node* mm = g.nodes()[0];
    EXPECT_EQ(mm->input(0)->name(), "xq");
    const Tensor& b = mm->input(1)->constant();  // W transposed to [K, N], still int8
    ASSERT_EQ(b.dtype(), DType::kInt8);
    EXPECT_EQ(b.get_i64(1), 2);
    EXPECT_EQ(b.get_i64(2), -7);
    EXPECT_EQ(mm->input(2)->constant().get_i64(0), 3);  // x's zero point
    const Tensor& s = g.nodes()[2]->input(1)->constant();  // x_s * w_s per column
    EXPECT_FLOAT_EQ(s.get_f64(0), 0.125);
    EXPECT_FLOAT_EQ(s.get_f64(1), 0.0625);
    const Tensor& bias = g.nodes()[3]->input(1)->constant();  // 40 * 0.125, -9 * 0.0625
    EXPECT_FLOAT_EQ(bias.get_f64(0), 5.0);
    EXPECT_FLOAT_EQ(bias.get_f64(1), -0.5625);
}

TEST(FuseQdq, ReshapeAndTransposeBetweenEqualQdqPairsMoveBytes) {
    // A transformer's head split as quantize_static writes it: Q/DQ with one scale around each.
    const char* src = R"(
graph g(%xq: u8[2,6]) {
  const %s: f32[] = [0.5]
  const %z: u8[] = [3]
  const %shape: i64[3] = [2, 3, 2]
  %x = DequantizeLinear(%xq, %s, %z) : f32[2,6]
  %r = Reshape(%x, %shape) : f32[2,3,2]
  %rq = QuantizeLinear(%r, %s, %z) : u8[2,3,2]
  %rd = DequantizeLinear(%rq, %s, %z) : f32[2,3,2]
  %t = Transpose(%rd) {perm=[1,0,2]} : f32[3,2,2]
  %tq = QuantizeLinear(%t, %s, %z) : u8[3,2,2]
  return %tq
}
)";
    ir::Graph g = ir::parse_graph(src);
    fuse_and_fold(g);
    std::vector<std::string> ops;
    for (const ir::Node* n : g.nodes()) ops.push_back(n->op() + ":" + dtype_name(n->output(0)->type().dtype));
    EXPECT_EQ(ops, (std::vector<std::string>{"Reshape:u8", "Transpose:u8"}));
    // A different scale after the move rounds: it stays.
    std::string other = src;
    other.replace(other.find("%tq = QuantizeLinear(%t, %s, %z)"), 32, "%tq = QuantizeLinear(%t, %z2, %z)");
    other.replace(other.find("  const %shape"), 0, "  const %z2: f32[] = [0.25]\n");
    ir::Graph h = ir::parse_graph(other);
    fuse_and_fold(h);
    ASSERT_EQ(h.nodes().back()->op(), "QuantizeLinear");
}

TEST(FuseQdq, GemmWithWeightZeroPointOrAlphaStaysFloat) {
    std::string wz = kQdqGemm;
    wz.replace(wz.find("const %wz: i8[2] = [0, 0]"), 25, "const %wz: i8[2] = [0, 1]");
    EXPECT_PASS_GIVES(fuse_qdq, wz, wz);
    std::string alpha = kQdqGemm;
    alpha.replace(alpha.find("{transB=1}"), 10, "{alpha=2.0, transB=1}");
    EXPECT_PASS_GIVES(fuse_qdq, alpha, alpha);
}

}  // namespace
}  // namespace kiln::pass
