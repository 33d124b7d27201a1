// kiln::TrainingSession on an ONNX model with a Loop (an RNN, h = tanh(h W + X[i] U) for T
// steps, MSE on the last h): the step graph runs in the graph interpreter. It trains (the loss
// falls) and, step by step, its loss and parameters equal those of the same RNN unrolled into
// a straight-line ONNX model, which the session compiles (the ordinary path).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "../frontend/onnx_model_builder.h"
#include "kiln/training.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

constexpr int64_t kT = 4, kH = 3, kD = 2;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

void add_int64_init(onnx::GraphProto* g, const std::string& name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
}

/// The parameters and the model input, shared by both models.
void add_rnn_inputs(onnx::GraphProto* g) {
    add_input(g, "X", {kT, 1, kD});
    add_float_init(g, "W", {kH, kH}, random_floats(kH * kH, 1, 0.6f));
    add_float_init(g, "U", {kD, kH}, random_floats(kD * kH, 2, 0.8f));
    add_float_init(g, "h0", {1, kH}, random_floats(kH, 3, 0.1f));
    add_output(g, "h_last", {1, kH});
}

/// One step h2 = tanh(h W + x U) in `g`, from values named h and x; names get `suffix`.
void add_step(onnx::GraphProto* g, const std::string& h, const std::string& x, const std::string& h2,
              const std::string& suffix) {
    add_node(g, "MatMul", {h, "W"}, {"hw" + suffix});
    add_node(g, "MatMul", {x, "U"}, {"xu" + suffix});
    add_node(g, "Add", {"hw" + suffix, "xu" + suffix}, {"pre" + suffix});
    add_node(g, "Tanh", {"pre" + suffix}, {h2});
}

std::string loop_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_rnn_inputs(g);
    add_int64_init(g, "trips", kT);
    onnx::NodeProto* loop = add_node(g, "Loop", {"trips", "", "h0"}, {"h_last"}, "rnn");
    auto* a = loop->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* body = a->mutable_g();
    body->set_name("rnn_step");
    add_input(body, "i", {}, onnx::TensorProto::INT64);
    add_input(body, "c", {}, onnx::TensorProto::BOOL);
    add_input(body, "h", {1, kH});
    add_node(body, "Identity", {"c"}, {"c_out"});
    attr_int(add_node(body, "Gather", {"X", "i"}, {"x"}), "axis", 0);  // X, W, U: the outer graph's
    add_step(body, "h", "x", "h2", "");
    add_output(body, "c_out", {}, onnx::TensorProto::BOOL);
    add_output(body, "h2", {1, kH});
    return m.SerializeAsString();
}

std::string unrolled_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_rnn_inputs(g);
    std::string h = "h0";
    for (int64_t t = 0; t < kT; ++t) {
        const std::string s = std::to_string(t);
        add_int64_init(g, "t" + s, t);
        attr_int(add_node(g, "Gather", {"X", "t" + s}, {"x" + s}), "axis", 0);
        const std::string h2 = t + 1 == kT ? "h_last" : "state" + s;
        add_step(g, h, "x" + s, h2, s);
        h = h2;
    }
    return m.SerializeAsString();
}

std::unique_ptr<TrainingSession> session(const fs::path& path, const std::string& model) {
    {
        std::ofstream f(path, std::ios::binary);
        f << model;
    }
    TrainingOptions o;
    o.session.threads = 1;
    o.loss.kind = "mse";
    o.optimizer.kind = "sgd";
    o.optimizer.lr = 0.5;
    return TrainingSession::create(path.string(), o);
}

TEST(ControlFlowTrainingSession, RnnLoopModelTrainsLikeTheUnrolledModel) {
    const fs::path dir = fs::temp_directory_path() / ("kiln_cf_training_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto loop = session(dir / "loop.onnx", loop_model());
    auto unrolled = session(dir / "unrolled.onnx", unrolled_model());
    EXPECT_EQ(loop->parameter_names(), (std::vector<std::string>{"W", "U", "h0"}));
    EXPECT_EQ(loop->parameter_names(), unrolled->parameter_names());
    EXPECT_NE(loop->memory_report().find("interpreted"), std::string::npos) << loop->memory_report();

    Tensor x(DType::kFloat32, {kT, 1, kD}), target(DType::kFloat32, {1, kH});
    const std::vector<float> xv = random_floats(kT * kD, 4, 1.0f), tv = random_floats(kH, 5, 0.6f);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, xv[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < target.numel(); ++i) target.set_f64(i, tv[static_cast<size_t>(i)]);
    const std::map<std::string, Tensor> batch{{"X", x}, {"labels", target}};
    std::vector<double> losses;
    for (int step = 0; step < 30; ++step) {
        const double l = loop->train_step(batch).loss, lu = unrolled->train_step(batch).loss;
        EXPECT_NEAR(l, lu, 1e-5 * (1 + std::abs(lu))) << "step " << step;
        losses.push_back(l);
        for (const std::string& name : loop->parameter_names()) {
            const Tensor p = loop->parameter(name), q = unrolled->parameter(name);
            for (int64_t i = 0; i < p.numel(); ++i)
                ASSERT_NEAR(p.get_f64(i), q.get_f64(i), 2e-5) << name << "[" << i << "] after step " << step;
        }
    }
    EXPECT_LT(losses.back(), 0.2 * losses.front()) << "first loss " << losses.front() << ", last " << losses.back();
    fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
