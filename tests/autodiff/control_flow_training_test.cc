// End to end: an RNN written as a Loop trains. autodiff::build_training_graph (forward, MSE loss,
// the backward through the Loop, the SGD update: one graph) runs in the graph interpreter step
// after step, the parameters fed back each time. The loss falls, and the parameters after every
// step equal those of the same RNN unrolled into a straight-line graph (built here, no Loop) and
// trained the same way. (kiln::TrainingSession compiles its graphs and does not take regions
// yet: see docs/training.md.)
#include <gtest/gtest.h>

#include <map>

#include "autodiff/training_graph.h"
#include "gradient_check.h"
#include "pass/rewrite.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::InterpretedGraph;
using kiln::testing::random_tensor;

constexpr int64_t kT = 5, kH = 4, kD = 3;

ir::TensorType f32(Shape s) { return ir::TensorType::of_static(DType::kFloat32, s); }

ir::Value* op(ir::Graph& g, const std::string& name, const std::vector<ir::Value*>& ins, ir::AttrMap attrs = {}) {
    return pass::add_inferred_node(g, name, ins, std::move(attrs))->output(0);
}

ir::Value* i64_const(ir::Graph& g, int64_t v) {
    Tensor t(DType::kInt64, {});
    t.set_i64(0, v);
    return g.add_constant(g.fresh_name("k"), t);
}

/// The model's input and initializers (W, U, h0).
void add_inputs(ir::Graph& g) {
    g.add_input("X", f32({kT, 1, kD}));
    g.add_constant("W", random_tensor({kH, kH}, -0.5, 0.5, 1, DType::kFloat32));
    g.add_constant("U", random_tensor({kD, kH}, -0.5, 0.5, 2, DType::kFloat32));
    g.add_constant("h0", random_tensor({1, kH}, -0.1, 0.1, 5, DType::kFloat32));
}

ir::Value* step(ir::Graph& g, ir::Value* h, ir::Value* xt, ir::Value* W, ir::Value* U) {
    return op(g, "Tanh", {op(g, "Add", {op(g, "MatMul", {h, W}), op(g, "MatMul", {xt, U})})});
}

/// h_T of h_t = tanh(h_{t-1} W + X[t] U), as a Loop reading W, U and X from the outer graph.
ir::Graph loop_model() {
    ir::Graph g;
    add_inputs(g);
    auto body = std::make_shared<ir::Graph>();
    body->name = "rnn_step";
    ir::Value* i = body->add_input("i", ir::TensorType::of_static(DType::kInt64, {}));
    ir::Value* c = body->add_input("c", ir::TensorType::of_static(DType::kBool, {}));
    ir::Value* h = body->add_input("h", f32({1, kH}));
    ir::Value* W = body->add_outer_input("W", f32({kH, kH}));
    ir::Value* U = body->add_outer_input("U", f32({kD, kH}));
    ir::Value* xt = op(*body, "Gather", {body->add_outer_input("X", f32({kT, 1, kD})), i}, {{"axis", int64_t{0}}});
    body->add_output(op(*body, "Identity", {c}));
    body->add_output(step(*body, h, xt, W, U));
    ir::Node* loop = g.add_node("Loop", {i64_const(g, kT), nullptr, g.find_value("h0")}, {{"body", ir::GraphAttr(body)}},
                                {f32({1, kH})}, {"h_last"}, "rnn");
    g.add_output(loop->output(0));
    return g;
}

/// The same RNN unrolled.
ir::Graph unrolled_model() {
    ir::Graph g;
    add_inputs(g);
    ir::Value* h = g.find_value("h0");
    for (int64_t t = 0; t < kT; ++t) {
        ir::Value* xt = op(g, "Gather", {g.find_value("X"), i64_const(g, t)}, {{"axis", int64_t{0}}});
        h = step(g, h, xt, g.find_value("W"), g.find_value("U"));
    }
    g.add_output(h);
    return g;
}

/// One model's train-step graph in the interpreter, with its parameters between steps.
class Trainer {
public:
    explicit Trainer(ir::Graph model) {
        // The default parameters: W and U (the Loop's body reads them by name) and h0.
        const ModelState state = find_model_state(model, {"W", "U", "h0"}, {});
        EXPECT_EQ(state.params, (std::vector<std::string>{"W", "U", "h0"}));
        for (const std::string& name : state.params) params_[name] = model.find_value(name)->constant();
        TrainingGraph tg =
            build_training_graph(std::move(model), state, {"mse", "", "labels"}, spec_, TrainingGraphKind::kTrainStep);
        for (const ir::Value* in : tg.graph.inputs()) inputs_.push_back(in->name());
        outputs_ = tg.outputs;
        run_ = std::make_unique<InterpretedGraph>(std::move(tg.graph));
    }

    /// One SGD step at learning rate `lr`; returns the loss before the update.
    double step(const Tensor& x, const Tensor& labels, double lr, int64_t n) {
        std::map<std::string, Tensor> feed = params_;
        feed["X"] = x;
        feed["labels"] = labels;
        const std::vector<std::string> names = optimizer_scalar_names(spec_);
        const std::vector<double> values = optimizer_scalar_values(spec_, n, lr);
        for (size_t i = 0; i < names.size(); ++i) {
            Tensor s(DType::kFloat32, {});
            s.set_f64(0, values[i]);
            feed[names[i]] = s;
        }
        std::vector<Tensor> ins;
        for (const std::string& name : inputs_) {
            EXPECT_TRUE(feed.count(name)) << "no value for training graph input '" << name << "'";
            ins.push_back(feed[name]);
        }
        std::vector<Tensor> outs = run_->run(ins);
        double loss = 0;
        for (size_t k = 0; k < outputs_.size(); ++k) {
            if (outputs_[k] == "loss") loss = outs[k].get_f64(0);
            if (outputs_[k].rfind("param:", 0) == 0) params_[outputs_[k].substr(6)] = outs[k];
        }
        return loss;
    }
    const std::map<std::string, Tensor>& params() const { return params_; }

private:
    OptimizerSpec spec_;  // plain SGD
    std::map<std::string, Tensor> params_;
    std::vector<std::string> inputs_, outputs_;
    std::unique_ptr<InterpretedGraph> run_;
};

TEST(ControlFlowTraining, RnnLoopTrainsLikeTheUnrolledRnn) {
    Trainer loop(loop_model()), unrolled(unrolled_model());
    const Tensor x = random_tensor({kT, 1, kD}, -1, 1, 3, DType::kFloat32);
    const Tensor target = random_tensor({1, kH}, -0.6, 0.6, 4, DType::kFloat32);
    std::vector<double> losses;
    for (int64_t n = 0; n < 40; ++n) {
        const double l = loop.step(x, target, 0.5, n);
        const double lu = unrolled.step(x, target, 0.5, n);
        EXPECT_NEAR(l, lu, 1e-5 * (1 + std::abs(lu))) << "step " << n;
        losses.push_back(l);
        ASSERT_EQ(unrolled.params().size(), 3u);
        for (const auto& [name, p] : unrolled.params()) {
            const Tensor& q = loop.params().at(name);
            for (int64_t i = 0; i < p.numel(); ++i)
                ASSERT_NEAR(q.get_f64(i), p.get_f64(i), 1e-5) << name << " element " << i << " after step " << n;
        }
    }
    EXPECT_LT(losses.back(), 0.2 * losses.front()) << "first loss " << losses.front() << ", last " << losses.back();
}

}  // namespace
}  // namespace kiln::autodiff
