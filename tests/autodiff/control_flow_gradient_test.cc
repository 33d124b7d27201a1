// Gradients through If, Loop and Scan (autodiff/control_flow_gradient.h), in float64. Each graph
// with control flow is differentiated and run by the graph interpreter, and compared with the
// same computation unrolled into a straight-line graph built here independently (no regions;
// differentiated by the existing autodiff) within 1e-6: an If (both branches, branches reading
// outer values), an RNN Loop (h = tanh(h W + x_t U), carried state and scan output in the loss),
// a Loop whose condition ends it early (data-dependent trip count, an int carried beside), a
// Scan with a reversed input and a reversed output on axis 1, and a Loop nested in a Loop. The
// RNN Loop and the If are also checked against central differences (gradient_check.h). Last,
// the errors for what has no gradient.
#include <gtest/gtest.h>

#include <functional>

#include "autodiff/differentiate.h"
#include "gradient_check.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::GradCheckOptions;
using kiln::testing::random_tensor;
using kiln::testing::TestGraph;
using kiln::testing::weighted_sum_loss;

ir::TensorType f64(Shape s) { return ir::TensorType::of_static(DType::kFloat64, s); }
ir::TensorType i64(Shape s) { return ir::TensorType::of_static(DType::kInt64, s); }
const ir::TensorType kBool = ir::TensorType::of_static(DType::kBool, {});

ir::Value* op(ir::Graph& g, const std::string& name, const std::vector<ir::Value*>& ins, ir::AttrMap attrs = {}) {
    return pass::add_inferred_node(g, name, ins, std::move(attrs))->output(0);
}

ir::Value* i64_const(ir::Graph& g, int64_t v, Shape shape = {}) {
    Tensor t(DType::kInt64, shape);
    t.set_i64(0, v);
    return g.add_constant(g.fresh_name("k"), t);
}

ir::Value* f64_const(ir::Graph& g, double v) {
    Tensor t(DType::kFloat64, {});
    t.set_f64(0, v);
    return g.add_constant(g.fresh_name("f"), t);
}

ir::Value* bool_const(ir::Graph& g, bool v) {
    Tensor t(DType::kBool, {});
    t.set_i64(0, v);
    return g.add_constant(g.fresh_name("b"), t);
}

/// A graph's scalar loss and the values to differentiate.
struct Built {
    ir::Value* loss = nullptr;
    std::vector<ir::Value*> wrt;
};
using Build = std::function<Built(ir::Graph&)>;

/// Runs (loss, d loss / d wrt...) of the graph `build` makes, in the graph interpreter.
std::vector<Tensor> loss_and_gradients(const Build& build, const std::vector<Tensor>& inputs, LoopValues mode) {
    ir::Graph g;
    Built b = build(g);
    std::vector<ir::Value*> outs{b.loss};
    GradientOptions opts;
    opts.loop_values = mode;
    for (ir::Value* grad : differentiate(g, b.loss, b.wrt, opts).grads) outs.push_back(grad);
    g.set_outputs(outs);
    GradCheckOptions o;
    o.interpret = true;
    return TestGraph(g, o).run(inputs);
}

/// Control flow vs unrolled: the loss and every gradient element within `tol`, with the loops'
/// values kept and recomputed.
void expect_same(const std::string& name, const Build& with_control_flow, const std::vector<Tensor>& cf_inputs,
                 const Build& unrolled, const std::vector<Tensor>& unrolled_inputs, double tol = 1e-6) {
    const std::vector<Tensor> want = loss_and_gradients(unrolled, unrolled_inputs, LoopValues::kKeep);
    for (LoopValues mode : {LoopValues::kKeep, LoopValues::kRecompute}) {
    const std::string what = name + (mode == LoopValues::kKeep ? " (kept)" : " (recomputed)");
    const std::vector<Tensor> got = loss_and_gradients(with_control_flow, cf_inputs, mode);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].shape(), want[k].shape()) << what << " output " << k;
        double largest = 0;
        for (int64_t i = 0; i < got[k].numel(); ++i) {
            EXPECT_NEAR(got[k].get_f64(i), want[k].get_f64(i), tol) << what << (k ? " gradient " : " loss ") << k
                                                                     << " element " << i;
            largest = std::max(largest, std::abs(want[k].get_f64(i)));
        }
        if (k > 0) EXPECT_GT(largest, 1e-3) << what << ": gradient " << k << " is all (near) zero";
    }
    }
}

// ------------------------------------------------------------------------------------------ If

// a = x * w (outer); If(c) { y = tanh(a) * w, z = a * a } else { y = x * x, z = -x }; the loss
// reads y, z and a itself (so a's gradient sums a direct use and the branch's).
ir::GraphAttr if_branch(bool then) {
    auto b = std::make_shared<ir::Graph>();
    b->name = then ? "then" : "else";
    if (then) {
        ir::Value* a = b->add_outer_input("a", f64({3}));
        ir::Value* w = b->add_outer_input("w", f64({3}));
        b->add_output(op(*b, "Mul", {op(*b, "Tanh", {a}), w}));
        b->add_output(op(*b, "Mul", {a, a}));
    } else {
        ir::Value* x = b->add_outer_input("x", f64({3}));
        b->add_output(op(*b, "Mul", {x, x}));
        b->add_output(op(*b, "Neg", {x}));
    }
    return b;
}

Built if_graph(ir::Graph& g, const bool* fixed_cond) {
    ir::Value* x = g.add_input("x", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    ir::Value* c = fixed_cond ? bool_const(g, *fixed_cond) : g.add_input("c", kBool);
    ir::Node* a = g.add_node("Mul", {x, w}, {}, {f64({3})}, {"a"}, "a");
    ir::Node* iff = g.add_node("If", {c}, {{"then_branch", if_branch(true)}, {"else_branch", if_branch(false)}},
                               {f64({3}), f64({3})}, {"y", "z"}, "choose");
    return {weighted_sum_loss(g, {iff->output(0), iff->output(1), a->output(0)}, 1), {x, w}};
}

Built if_unrolled(ir::Graph& g, bool cond) {
    ir::Value* x = g.add_input("x", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    ir::Value* a = op(g, "Mul", {x, w});
    ir::Value* y = cond ? op(g, "Mul", {op(g, "Tanh", {a}), w}) : op(g, "Mul", {x, x});
    ir::Value* z = cond ? op(g, "Mul", {a, a}) : op(g, "Neg", {x});
    return {weighted_sum_loss(g, {y, z, a}, 1), {x, w}};
}

TEST(ControlFlowGradient, IfEqualsTheUnrolledBranchBothWays) {
    const Tensor x = random_tensor({3}, -1, 1, 1), w = random_tensor({3}, -1, 1, 2);
    for (bool cond : {true, false}) {
        Tensor c(DType::kBool, {});
        c.set_i64(0, cond);
        expect_same(cond ? "If (then)" : "If (else)", [](ir::Graph& g) { return if_graph(g, nullptr); }, {x, w, c},
                    [cond](ir::Graph& g) { return if_unrolled(g, cond); }, {x, w});
    }
}

TEST(ControlFlowGradient, IfAgainstCentralDifferences) {
    GradCheckOptions o;
    o.interpret = true;
    for (bool cond : {true, false})
        kiln::testing::check_graph_gradient(
            cond ? "If (then)" : "If (else)", [&](ir::Graph& g) { return if_graph(g, &cond).loss; },
            {random_tensor({3}, -1, 1, 3), random_tensor({3}, -1, 1, 4)}, o);
}

// ------------------------------------------------------------------------------- Loop (an RNN)

constexpr int64_t kT = 4, kH = 3, kD = 2;

// body(i, c, h) -> (c, h' = tanh(h W + X[i] U), h'): W, U, X captured from the outer graph.
ir::GraphAttr rnn_body() {
    auto b = std::make_shared<ir::Graph>();
    b->name = "rnn_step";
    ir::Value* i = b->add_input("i", i64({}));
    ir::Value* c = b->add_input("c", kBool);
    ir::Value* h = b->add_input("h", f64({1, kH}));
    ir::Value* W = b->add_outer_input("W", f64({kH, kH}));
    ir::Value* U = b->add_outer_input("U", f64({kD, kH}));
    ir::Value* X = b->add_outer_input("X", f64({kT, 1, kD}));
    ir::Value* xt = op(*b, "Gather", {X, i}, {{"axis", int64_t{0}}});
    ir::Value* h2 = op(*b, "Tanh", {op(*b, "Add", {op(*b, "MatMul", {h, W}), op(*b, "MatMul", {xt, U})})});
    b->add_output(op(*b, "Identity", {c}));
    b->add_output(h2);
    b->add_output(h2);
    return b;
}

Built rnn_loop(ir::Graph& g) {
    ir::Value* W = g.add_input("W", f64({kH, kH}));
    ir::Value* U = g.add_input("U", f64({kD, kH}));
    ir::Value* X = g.add_input("X", f64({kT, 1, kD}));
    ir::Value* h0 = g.add_input("h0", f64({1, kH}));
    ir::Node* loop = g.add_node("Loop", {i64_const(g, kT), bool_const(g, true), h0}, {{"body", rnn_body()}},
                                {f64({1, kH}), f64({kT, 1, kH})}, {"h_last", "h_all"}, "rnn");
    return {weighted_sum_loss(g, {loop->output(0), loop->output(1)}, 2), {W, U, X, h0}};
}

Built rnn_unrolled(ir::Graph& g) {
    ir::Value* W = g.add_input("W", f64({kH, kH}));
    ir::Value* U = g.add_input("U", f64({kD, kH}));
    ir::Value* X = g.add_input("X", f64({kT, 1, kD}));
    ir::Value* h0 = g.add_input("h0", f64({1, kH}));
    ir::Value* h = h0;
    std::vector<ir::Value*> rows;
    for (int64_t t = 0; t < kT; ++t) {
        ir::Value* xt = op(g, "Gather", {X, i64_const(g, t)}, {{"axis", int64_t{0}}});
        h = op(g, "Tanh", {op(g, "Add", {op(g, "MatMul", {h, W}), op(g, "MatMul", {xt, U})})});
        rows.push_back(op(g, "Unsqueeze", {h, i64_const(g, 0, {1})}));
    }
    ir::Value* all = op(g, "Concat", rows, {{"axis", int64_t{0}}});
    return {weighted_sum_loss(g, {h, all}, 2), {W, U, X, h0}};
}

std::vector<Tensor> rnn_inputs() {
    return {random_tensor({kH, kH}, -0.8, 0.8, 11), random_tensor({kD, kH}, -1, 1, 12),
            random_tensor({kT, 1, kD}, -1, 1, 13), random_tensor({1, kH}, -0.5, 0.5, 14)};
}

TEST(ControlFlowGradient, RnnLoopEqualsTheUnrolledGraph) {
    expect_same("RNN Loop", rnn_loop, rnn_inputs(), rnn_unrolled, rnn_inputs());
}

/// The forward ops of `op` left in the body of the backward Loop of `g`.
int forward_ops_in_backward_loop(const ir::Graph& g, const std::string& op) {
    int count = 0;
    for (const ir::Node* n : g.nodes()) {
        if (n->op() != "Loop" || !is_backward_node(*n)) continue;
        for (const ir::Node* m : std::get<ir::GraphAttr>(n->attrs().at("body"))->nodes())
            count += m->op() == op && !is_backward_node(*m);
    }
    return count;
}

// Kept: the backward body reads tanh's output and X[t] from the forward's stacks and runs no
// forward MatMul; recomputed: it runs both again.
TEST(ControlFlowGradient, KeptLoopValuesSpareTheBackwardTheForwardWork) {
    for (LoopValues mode : {LoopValues::kKeep, LoopValues::kRecompute}) {
        ir::Graph g;
        Built b = rnn_loop(g);
        GradientOptions opts;
        opts.loop_values = mode;
        differentiate(g, b.loss, b.wrt, opts);
        EXPECT_EQ(forward_ops_in_backward_loop(g, "MatMul"), mode == LoopValues::kKeep ? 0 : 2);
        EXPECT_EQ(forward_ops_in_backward_loop(g, "Tanh"), mode == LoopValues::kKeep ? 0 : 1);
        int forward_loops = 0;
        for (const ir::Node* n : g.nodes()) forward_loops += n->op() == "Loop" && !is_backward_node(*n);
        EXPECT_EQ(forward_loops, 1) << "the forward Loop is replaced, not duplicated";
    }
}

TEST(ControlFlowGradient, RnnLoopAgainstCentralDifferences) {
    GradCheckOptions o;
    o.interpret = true;
    kiln::testing::check_graph_gradient("RNN Loop", [](ir::Graph& g) { return rnn_loop(g).loss; }, rnn_inputs(), o);
}

// ------------------------------------------------------------- Loop ending early on its cond

// body(i, c, s, k) -> (sum(s') < 40, s' = s * w + w, k + 2), M = 50: the condition ends it after
// a number of iterations that depends on s0 and w. loss = weighted(s_N) * k_N.
constexpr double kLimit = 40;

ir::GraphAttr growth_body() {
    auto b = std::make_shared<ir::Graph>();
    b->name = "grow";
    b->add_input("i", i64({}));
    b->add_input("c", kBool);
    ir::Value* s = b->add_input("s", f64({3}));
    ir::Value* k = b->add_input("k", i64({}));
    ir::Value* w = b->add_outer_input("w", f64({3}));
    ir::Value* s2 = op(*b, "Add", {op(*b, "Mul", {s, w}), w});
    ir::Value* sum = op(*b, "ReduceSum", {s2}, {{"keepdims", int64_t{0}}});
    b->add_output(op(*b, "Less", {sum, f64_const(*b, kLimit)}));
    b->add_output(s2);
    b->add_output(op(*b, "Add", {k, i64_const(*b, 2)}));
    return b;
}

Built growth_loop(ir::Graph& g) {
    ir::Value* s0 = g.add_input("s0", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    ir::Node* loop = g.add_node("Loop", {i64_const(g, 50), bool_const(g, true), s0, i64_const(g, 0)},
                                {{"body", growth_body()}}, {f64({3}), i64({})}, {"s_end", "k_end"}, "grow");
    ir::Value* k = op(g, "Cast", {loop->output(1)}, {{"to", int64_t{11}}});
    return {op(g, "Mul", {weighted_sum_loss(g, {loop->output(0)}, 3), k}), {s0, w}};
}

Built growth_unrolled(ir::Graph& g, int64_t n) {
    ir::Value* s = g.add_input("s0", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    for (int64_t t = 0; t < n; ++t) s = op(g, "Add", {op(g, "Mul", {s, w}), w});
    return {op(g, "Mul", {weighted_sum_loss(g, {s}, 3), f64_const(g, 2.0 * static_cast<double>(n))}),
            {g.inputs()[0], w}};
}

TEST(ControlFlowGradient, LoopEndingEarlyOnItsConditionEqualsTheUnrolledGraph) {
    for (uint64_t seed : {21, 22}) {
        const Tensor s0 = random_tensor({3}, 0.1, 1, seed), w = random_tensor({3}, 1.1, 1.6, seed + 100);
        // The trip count, by the spec's loop in plain C++.
        std::vector<double> s = {s0.get_f64(0), s0.get_f64(1), s0.get_f64(2)};
        int64_t n = 0;
        for (bool cond = true; cond && n < 50; ++n) {
            double sum = 0;
            for (int e = 0; e < 3; ++e) sum += s[e] = s[e] * w.get_f64(e) + w.get_f64(e);
            cond = sum < kLimit;
            ASSERT_GT(std::abs(sum - kLimit), 1e-3) << "too close to the limit for a stable count";
        }
        ASSERT_GT(n, 2);
        ASSERT_LT(n, 50);  // the condition ended it, not M
        expect_same("Loop ending after " + std::to_string(n) + " iterations", growth_loop, {s0, w},
                    [n](ir::Graph& g) { return growth_unrolled(g, n); }, {s0, w});
    }
}

// cond0 = false: no iteration runs; s_end = s0, so d loss / d s0 is the loss weights and w gets
// zeros (the backward Loop runs zero times too).
TEST(ControlFlowGradient, ALoopThatRunsZeroTimesPassesTheGradientThrough) {
    for (LoopValues mode : {LoopValues::kKeep, LoopValues::kRecompute}) {
        ir::Graph g;
        ir::Value* s0 = g.add_input("s0", f64({3}));
        ir::Value* w = g.add_input("w", f64({3}));
        ir::Node* loop = g.add_node("Loop", {i64_const(g, 50), bool_const(g, false), s0, i64_const(g, 0)},
                                    {{"body", growth_body()}}, {f64({3}), i64({})}, {"s_end", "k_end"}, "grow");
        ir::Value* loss = weighted_sum_loss(g, {loop->output(0)}, 3);
        const Tensor weights = loop->output(0)->users().at(0)->input(1)->constant();  // weighted_sum_loss's R
        GradientOptions opts;
        opts.loop_values = mode;
        g.set_outputs(differentiate(g, loss, {s0, w}, opts).grads);
        GradCheckOptions o;
        o.interpret = true;
        std::vector<Tensor> got = TestGraph(g, o).run({random_tensor({3}, 0, 1, 7), random_tensor({3}, 1, 2, 8)});
        for (int64_t i = 0; i < 3; ++i) {
            EXPECT_DOUBLE_EQ(got[0].get_f64(i), weights.get_f64(i));
            EXPECT_EQ(got[1].get_f64(i), 0.0);
        }
    }
}

// ----------------------------------------------------------------------------------------- Scan

// Scan(s0; X1 along axis 0, X2 along axis 1 reversed) with body(s, a, b) -> (s' = tanh(s w + a),
// y1 = s' b, y2 = s' + a); y1 stacked on axis 0, y2 on axis 1 in reverse order.
constexpr int64_t kSteps = 4, kW = 3;

ir::GraphAttr scan_body() {
    auto b = std::make_shared<ir::Graph>();
    b->name = "scan_step";
    ir::Value* s = b->add_input("s", f64({kW}));
    ir::Value* a = b->add_input("a", f64({kW}));
    ir::Value* bb = b->add_input("b", f64({kW}));
    ir::Value* w = b->add_outer_input("w", f64({kW}));
    ir::Value* s2 = op(*b, "Tanh", {op(*b, "Add", {op(*b, "Mul", {s, w}), a})});
    b->add_output(s2);
    b->add_output(op(*b, "Mul", {s2, bb}));
    b->add_output(op(*b, "Add", {s2, a}));
    return b;
}

Built scan_graph(ir::Graph& g) {
    ir::Value* s0 = g.add_input("s0", f64({kW}));
    ir::Value* x1 = g.add_input("X1", f64({kSteps, kW}));
    ir::Value* x2 = g.add_input("X2", f64({kW, kSteps}));
    ir::Value* w = g.add_input("w", f64({kW}));
    ir::AttrMap attrs{{"body", scan_body()},
                      {"num_scan_inputs", int64_t{2}},
                      {"scan_input_axes", std::vector<int64_t>{0, 1}},
                      {"scan_input_directions", std::vector<int64_t>{0, 1}},
                      {"scan_output_axes", std::vector<int64_t>{0, 1}},
                      {"scan_output_directions", std::vector<int64_t>{0, 1}}};
    ir::Node* scan = g.add_node("Scan", {s0, x1, x2}, attrs, {f64({kW}), f64({kSteps, kW}), f64({kW, kSteps})},
                                {"s_end", "Y1", "Y2"}, "scan");
    return {weighted_sum_loss(g, {scan->output(0), scan->output(1), scan->output(2)}, 4), {s0, x1, x2, w}};
}

Built scan_unrolled(ir::Graph& g) {
    ir::Value* s = g.add_input("s0", f64({kW}));
    ir::Value* x1 = g.add_input("X1", f64({kSteps, kW}));
    ir::Value* x2 = g.add_input("X2", f64({kW, kSteps}));
    ir::Value* w = g.add_input("w", f64({kW}));
    std::vector<ir::Value*> y1(kSteps), y2(kSteps);
    for (int64_t t = 0; t < kSteps; ++t) {
        ir::Value* a = op(g, "Gather", {x1, i64_const(g, t)}, {{"axis", int64_t{0}}});
        ir::Value* b = op(g, "Gather", {x2, i64_const(g, kSteps - 1 - t)}, {{"axis", int64_t{1}}});
        s = op(g, "Tanh", {op(g, "Add", {op(g, "Mul", {s, w}), a})});
        y1[t] = op(g, "Unsqueeze", {op(g, "Mul", {s, b}), i64_const(g, 0, {1})});
        y2[kSteps - 1 - t] = op(g, "Unsqueeze", {op(g, "Add", {s, a}), i64_const(g, 1, {1})});  // reversed
    }
    ir::Value* Y1 = op(g, "Concat", y1, {{"axis", int64_t{0}}});
    ir::Value* Y2 = op(g, "Concat", y2, {{"axis", int64_t{1}}});
    return {weighted_sum_loss(g, {s, Y1, Y2}, 4), {g.inputs()[0], x1, x2, w}};
}

TEST(ControlFlowGradient, ScanWithReversedAxesEqualsTheUnrolledGraph) {
    const std::vector<Tensor> in = {random_tensor({kW}, -1, 1, 31), random_tensor({kSteps, kW}, -1, 1, 32),
                                    random_tensor({kW, kSteps}, -1, 1, 33), random_tensor({kW}, -1, 1, 34)};
    expect_same("Scan", scan_graph, in, scan_unrolled, in);
}

// ------------------------------------------------------------------------------ nested loops

// Loop(3) { v = Loop(2) { u = tanh(u * w + v) } (u0 = v) ; v = v + u }: the inner body reads w
// from the outermost graph and v from the outer body.
Built nested_loops(ir::Graph& g) {
    ir::Value* v0 = g.add_input("v0", f64({2}));
    ir::Value* w = g.add_input("w", f64({2}));
    auto inner = std::make_shared<ir::Graph>();
    inner->name = "inner";
    inner->add_input("j", i64({}));
    ir::Value* ic = inner->add_input("ic", kBool);
    ir::Value* u = inner->add_input("u", f64({2}));
    ir::Value* iw = inner->add_outer_input("w", f64({2}));
    ir::Value* iv = inner->add_outer_input("v", f64({2}));
    inner->add_output(op(*inner, "Identity", {ic}));
    inner->add_output(op(*inner, "Tanh", {op(*inner, "Add", {op(*inner, "Mul", {u, iw}), iv})}));
    auto outer = std::make_shared<ir::Graph>();
    outer->name = "outer";
    outer->add_input("i", i64({}));
    ir::Value* oc = outer->add_input("oc", kBool);
    ir::Value* v = outer->add_input("v", f64({2}));
    ir::Node* in_loop = outer->add_node("Loop", {i64_const(*outer, 2), nullptr, v}, {{"body", ir::GraphAttr(inner)}},
                                        {f64({2})}, {"u_end"}, "inner_loop");
    outer->add_output(op(*outer, "Identity", {oc}));
    outer->add_output(op(*outer, "Add", {v, in_loop->output(0)}));
    ir::Node* loop = g.add_node("Loop", {i64_const(g, 3), nullptr, v0}, {{"body", ir::GraphAttr(outer)}}, {f64({2})},
                                {"v_end"}, "outer_loop");
    return {weighted_sum_loss(g, {loop->output(0)}, 5), {v0, w}};
}

Built nested_unrolled(ir::Graph& g) {
    ir::Value* v = g.add_input("v0", f64({2}));
    ir::Value* w = g.add_input("w", f64({2}));
    for (int i = 0; i < 3; ++i) {
        ir::Value* u = v;
        for (int j = 0; j < 2; ++j) u = op(g, "Tanh", {op(g, "Add", {op(g, "Mul", {u, w}), v})});
        v = op(g, "Add", {v, u});
    }
    return {weighted_sum_loss(g, {v}, 5), {g.inputs()[0], w}};
}

TEST(ControlFlowGradient, NestedLoopsEqualTheUnrolledGraph) {
    const std::vector<Tensor> in = {random_tensor({2}, -1, 1, 41), random_tensor({2}, -1, 1, 42)};
    expect_same("nested Loop", nested_loops, in, nested_unrolled, in);
}

// Loop(4) { h = If(i < 2) { tanh(h * w) } else { h * v + h } }: the branches read the body's
// carried h by name, and w, v from the outermost graph; both branches are taken.
Built if_in_loop(ir::Graph& g) {
    ir::Value* h0 = g.add_input("h0", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    ir::Value* v = g.add_input("v", f64({3}));
    auto then_g = std::make_shared<ir::Graph>();
    then_g->name = "early";
    then_g->add_output(op(*then_g, "Tanh", {op(*then_g, "Mul", {then_g->add_outer_input("h", f64({3})),
                                                                then_g->add_outer_input("w", f64({3}))})}));
    auto else_g = std::make_shared<ir::Graph>();
    else_g->name = "late";
    ir::Value* eh = else_g->add_outer_input("h", f64({3}));
    else_g->add_output(op(*else_g, "Add", {op(*else_g, "Mul", {eh, else_g->add_outer_input("v", f64({3}))}), eh}));
    auto body = std::make_shared<ir::Graph>();
    body->name = "body";
    ir::Value* i = body->add_input("i", i64({}));
    ir::Value* c = body->add_input("c", kBool);
    body->add_input("h", f64({3}));
    ir::Value* early = op(*body, "Less", {i, i64_const(*body, 2)});
    ir::Node* iff = body->add_node("If", {early}, {{"then_branch", ir::GraphAttr(then_g)}, {"else_branch", ir::GraphAttr(else_g)}},
                                   {f64({3})}, {"h_next"}, "pick");
    body->add_output(op(*body, "Identity", {c}));
    body->add_output(iff->output(0));
    ir::Node* loop = g.add_node("Loop", {i64_const(g, 4), nullptr, h0}, {{"body", ir::GraphAttr(body)}}, {f64({3})},
                                {"h_end"}, "loop");
    (void)w;
    (void)v;
    return {weighted_sum_loss(g, {loop->output(0)}, 6), {h0, w, v}};
}

Built if_in_loop_unrolled(ir::Graph& g) {
    ir::Value* h = g.add_input("h0", f64({3}));
    ir::Value* w = g.add_input("w", f64({3}));
    ir::Value* v = g.add_input("v", f64({3}));
    for (int t = 0; t < 4; ++t) h = t < 2 ? op(g, "Tanh", {op(g, "Mul", {h, w})}) : op(g, "Add", {op(g, "Mul", {h, v}), h});
    return {weighted_sum_loss(g, {h}, 6), {g.inputs()[0], w, v}};
}

TEST(ControlFlowGradient, IfInsideALoopEqualsTheUnrolledGraph) {
    const std::vector<Tensor> in = {random_tensor({3}, -1, 1, 51), random_tensor({3}, -1, 1, 52),
                                    random_tensor({3}, -0.5, 0.5, 53)};
    expect_same("If in a Loop", if_in_loop, in, if_in_loop_unrolled, in);
}

// ------------------------------------------------------------------------------------ errors

void expect_unsupported(const Build& build, const std::vector<std::string>& parts) {
    ir::Graph g;
    Built b = build(g);
    try {
        differentiate(g, b.loss, b.wrt);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
        for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

TEST(ControlFlowGradient, WhatHasNoGradientIsANamedError) {
    // An op without a gradient inside the body: named, with the Loop around it.
    expect_unsupported(
        [](ir::Graph& g) {
            ir::Value* x = g.add_input("x", f64({2}));
            auto body = std::make_shared<ir::Graph>();
            body->add_input("i", i64({}));
            ir::Value* c = body->add_input("c", kBool);
            ir::Value* s = body->add_input("s", f64({2}));
            body->add_output(op(*body, "Identity", {c}));
            ir::Node* sine = body->add_node("Sin", {s}, {}, {f64({2})}, {"sin_s"}, "sine");
            body->add_output(sine->output(0));
            ir::Node* loop = g.add_node("Loop", {i64_const(g, 2), nullptr, x}, {{"body", ir::GraphAttr(body)}},
                                        {f64({2})}, {"out"}, "sines");
            return Built{weighted_sum_loss(g, {loop->output(0)}, 1), {x}};
        },
        {"no gradient for op 'Sin' (node 'sine')", "node 'sines' (Loop)"});
    // A sequence carried through the loop cannot be kept per iteration.
    expect_unsupported(
        [](ir::Graph& g) {
            ir::Value* x = g.add_input("x", f64({2}));
            ir::TensorType seq(DType::kFloat64, {});
            seq.kind = ir::TypeKind::kSequence;
            ir::Value* empty = g.add_node("SequenceEmpty", {}, {{"dtype", int64_t{11}}}, {seq}, {"empty"})->output(0);
            auto body = std::make_shared<ir::Graph>();
            body->add_input("i", i64({}));
            ir::Value* c = body->add_input("c", kBool);
            ir::Value* s = body->add_input("s", f64({2}));
            ir::Value* q = body->add_input("q", seq);
            body->add_output(op(*body, "Identity", {c}));
            body->add_output(op(*body, "Mul", {s, s}));
            body->add_output(body->add_node("SequenceInsert", {q, s}, {}, {seq}, {"q2"})->output(0));
            ir::Node* loop = g.add_node("Loop", {i64_const(g, 2), nullptr, x, empty}, {{"body", ir::GraphAttr(body)}},
                                        {f64({2}), seq}, {"out", "q_end"}, "collect");
            return Built{weighted_sum_loss(g, {loop->output(0)}, 1), {x}};
        },
        {"node 'collect' (Loop)", "loop-carried value 'q'", "seq<"});
    // A carried value that grows each iteration has no one gradient type to carry back.
    expect_unsupported(
        [](ir::Graph& g) {
            ir::Value* x = g.add_input("x", f64({2}));
            auto body = std::make_shared<ir::Graph>();
            body->add_input("i", i64({}));
            ir::Value* c = body->add_input("c", kBool);
            ir::Value* s = body->add_input("s", f64({2}));
            body->add_output(op(*body, "Identity", {c}));
            body->add_output(op(*body, "Concat", {s, s}, {{"axis", int64_t{0}}}));
            ir::Node* loop = g.add_node("Loop", {i64_const(g, 1), nullptr, x}, {{"body", ir::GraphAttr(body)}},
                                        {f64({4})}, {"out"}, "grow");
            return Built{weighted_sum_loss(g, {loop->output(0)}, 1), {x}};
        },
        {"node 'grow' (Loop)", "loop-carried value 's' enters the body as f64[2] but leaves it as f64[4]"});
    // A path through a sequence: a named error, not a silently zero gradient.
    expect_unsupported(
        [](ir::Graph& g) {
            ir::Value* x = g.add_input("x", f64({2}));
            ir::TensorType seq(DType::kFloat64, {});
            seq.kind = ir::TypeKind::kSequence;
            ir::Value* q = g.add_node("SequenceConstruct", {x}, {}, {seq}, {"q"}, "pack")->output(0);
            ir::Value* y = g.add_node("SequenceAt", {q, i64_const(g, 0)}, {}, {f64({2})}, {"y"}, "unpack")->output(0);
            return Built{weighted_sum_loss(g, {y}, 1), {x}};
        },
        {"no gradient for op 'SequenceAt' (node 'unpack')"});
    // Scan-8 (a batch axis and sequence_lens) has no gradient.
    expect_unsupported(
        [](ir::Graph& g) {
            ir::Value* x = g.add_input("x", f64({1, 3, 2}));
            auto body = std::make_shared<ir::Graph>();
            ir::Value* a = body->add_input("a", f64({2}));
            body->add_output(op(*body, "Mul", {a, a}));
            ir::Node* scan = g.add_node("Scan", {nullptr, x},
                                        {{"body", ir::GraphAttr(body)}, {"num_scan_inputs", int64_t{1}},
                                         {"directions", std::vector<int64_t>{0}}},
                                        {f64({1, 3, 2})}, {"y"}, "old_scan");
            return Built{weighted_sum_loss(g, {scan->output(0)}, 1), {x}};
        },
        {"node 'old_scan' (Scan)", "Scan-8"});
}

}  // namespace
}  // namespace kiln::autodiff
