// Activation recomputation (autodiff/recompute.h): the same gradients, bit for bit, from a
// smaller peak. The reference for "the same" is the session without recomputation; the
// gradients themselves are checked against numerical ones in the other autodiff tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "../frontend/onnx_model_builder.h"
#include "autodiff/differentiate.h"
#include "autodiff/recompute.h"
#include "compiler/compile.h"
#include "frontend/onnx/importer.h"
#include "kiln/training.h"
#include "pass/infer_shapes.h"
#include "pass/rewrite.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

constexpr int64_t kBatch = 8, kChannels = 4, kSize = 12, kLayers = 16, kClasses = 5;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

/// kLayers x (3x3 Conv + Relu), a residual Add every other layer, GlobalAveragePool, Gemm.
std::string write_deep_net(const fs::path& dir) {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), kChannels, kSize, kSize});
    std::string h = "x";
    for (int i = 0; i < kLayers; ++i) {
        const std::string w = "w" + std::to_string(i), b = "b" + std::to_string(i), c = "c" + std::to_string(i);
        add_float_init(g, w, {kChannels, kChannels, 3, 3}, random_floats(kChannels * kChannels * 9, 10 + i, 0.4f));
        add_float_init(g, b, {kChannels}, random_floats(kChannels, 100 + i, 0.1f));
        attr_ints(add_node(g, "Conv", {h, w, b}, {c}, "conv" + std::to_string(i)), "pads", {1, 1, 1, 1});
        std::string r = "r" + std::to_string(i);
        add_node(g, "Relu", {c}, {r}, "relu" + std::to_string(i));
        if (i % 2 == 1) {
            add_node(g, "Add", {r, h}, {"s" + std::to_string(i)}, "res" + std::to_string(i));
            r = "s" + std::to_string(i);
        }
        h = r;
    }
    add_node(g, "GlobalAveragePool", {h}, {"pooled"}, "gap");
    add_node(g, "Flatten", {"pooled"}, {"flat"}, "flatten");
    add_float_init(g, "fc_w", {kClasses, kChannels}, random_floats(kClasses * kChannels, 7, 0.5f));
    add_float_init(g, "fc_b", {kClasses}, random_floats(kClasses, 8, 0.1f));
    attr_int(add_node(g, "Gemm", {"flat", "fc_w", "fc_b"}, {"logits"}, "fc"), "transB", 1);
    add_output(g, "logits", {std::string("N"), kClasses});
    const fs::path path = dir / "deep.onnx";
    std::ofstream(path, std::ios::binary) << serialize(m);
    return path.string();
}

std::map<std::string, Tensor> batch(uint32_t seed) {
    Tensor x(DType::kFloat32, {kBatch, kChannels, kSize, kSize});
    std::vector<float> v = random_floats(static_cast<size_t>(x.numel()), seed, 1.0f);
    std::memcpy(x.data(), v.data(), x.nbytes());
    Tensor y(DType::kInt64, {kBatch});
    for (int64_t i = 0; i < kBatch; ++i) y.data_as<int64_t>()[i] = (i * 3 + seed) % kClasses;
    return {{"x", x}, {"labels", y}};
}

bool bit_identical(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class RecomputeTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_recompute_test_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        model_ = write_deep_net(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::unique_ptr<TrainingSession> session(const std::string& recompute, size_t limit = 0,
                                             const std::string& optimizer = "sgd", double momentum = 0) {
        TrainingOptions o;
        o.session.threads = 2;
        o.session.dims = {{"N", kBatch}};
        o.optimizer.kind = optimizer;
        o.optimizer.lr = 0.05;
        o.optimizer.momentum = momentum;
        o.recompute = recompute;
        o.recompute_memory_limit = limit;
        return TrainingSession::create(model_, o);
    }

    fs::path dir_;
    std::string model_;
};

TEST_F(RecomputeTest, SqrtGivesBitIdenticalGradientsFromASmallerPeak) {
    auto plain = session("none");
    auto sqrt = session("sqrt");
    double loss_plain = 0, loss_sqrt = 0;
    const auto g_plain = plain->gradients(batch(1), &loss_plain);
    const auto g_sqrt = sqrt->gradients(batch(1), &loss_sqrt);
    EXPECT_EQ(loss_plain, loss_sqrt);
    ASSERT_EQ(g_plain.size(), g_sqrt.size());
    for (const auto& [name, g] : g_plain) EXPECT_TRUE(bit_identical(g, g_sqrt.at(name))) << name;
    EXPECT_LT(sqrt->planned_peak_bytes(), plain->planned_peak_bytes());
    EXPECT_NE(sqrt->memory_report().find("recompute: "), std::string::npos);
}

TEST_F(RecomputeTest, SqrtTrainsTheSameModelOverSteps) {
    // The fused train step (backward and update in one graph) is fused differently when the
    // backward reads recomputed copies, and a different fusion may contract a*b+c into an FMA
    // differently: the updates agree to the last bits, not bit for bit (the gradients, checked
    // above, are bit-identical).
    auto plain = session("none", 0, "adam");
    auto sqrt = session("sqrt", 0, "adam");
    for (uint32_t s = 0; s < 4; ++s) {
        const StepResult a = plain->train_step(batch(s)), b = sqrt->train_step(batch(s));
        EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(a.loss)) << "step " << s;
    }
    for (const std::string& p : plain->parameter_names()) {
        const Tensor a = plain->parameter(p), b = sqrt->parameter(p);
        for (int64_t i = 0; i < a.numel(); ++i)
            ASSERT_NEAR(a.get_f64(i), b.get_f64(i), 1e-6 * (1 + std::abs(a.get_f64(i)))) << p << "[" << i << "]";
    }
}

TEST_F(RecomputeTest, AutoFitsTheLimitWithFewerCopiesThanSqrt) {
    // The estimated peaks without recomputation and with every segment recomputed bound the
    // limits auto can meet; halfway between needs some segments, not all: auto must fit that
    // limit (its estimated peak <= limit) with fewer recomputed copies than sqrt makes.
    auto differentiated = [&] {
        auto g = std::make_unique<ir::Graph>(frontend::import_onnx_file(model_));
        compiler::bind_input_shapes(*g, {{"N", kBatch}});
        pass::infer_shapes(*g, compiler::pass_context());
        // A scalar stand-in for the loss: ReduceSum of the logits.
        ir::Value* sum =
            pass::add_inferred_node(*g, "ReduceSum", {g->outputs().at(0)}, {{"keepdims", int64_t{0}}}, 1, "loss")->output(0);
        autodiff::differentiate(*g, sum, autodiff::float_constants(*g));
        return g;
    };
    auto g0 = differentiated();
    autodiff::RecomputeOptions none;
    const autodiff::RecomputeReport before = autodiff::recompute(*g0, none);
    EXPECT_EQ(before.peak_before, autodiff::estimate_peak_bytes(*g0));
    EXPECT_EQ(before.copied_nodes, 0);

    auto g_sqrt = differentiated();
    autodiff::RecomputeOptions all;
    all.mode = autodiff::RecomputeMode::kSqrt;
    const size_t est_none = autodiff::estimate_peak_bytes(*g_sqrt);
    const autodiff::RecomputeReport sq = autodiff::recompute(*g_sqrt, all);
    EXPECT_EQ(sq.peak_before, est_none);
    EXPECT_LT(sq.peak_after, est_none);
    EXPECT_EQ(sq.recomputed_segments, sq.segments);
    EXPECT_GT(sq.copied_nodes, 0);
    for (ir::Node* n : g_sqrt->nodes())
        if (pass::is_recomputation(*n)) EXPECT_FALSE(autodiff::is_backward_node(*n));

    const size_t limit = (est_none + sq.peak_after) / 2;
    ASSERT_LT(limit, est_none);  // the limit needs recomputation
    auto g_auto = differentiated();
    autodiff::RecomputeOptions fit;
    fit.mode = autodiff::RecomputeMode::kAuto;
    fit.memory_limit = limit;
    const autodiff::RecomputeReport au = autodiff::recompute(*g_auto, fit);
    EXPECT_LE(au.peak_after, limit) << au.str();                        // fits the limit
    EXPECT_GT(au.recomputed_segments, 0) << au.str();
    EXPECT_LT(au.recomputed_segments, sq.recomputed_segments) << au.str() << " vs sqrt " << sq.str();
    EXPECT_LT(au.copied_nodes, sq.copied_nodes) << au.str() << " vs sqrt " << sq.str();  // fewer copies

    // The session with that limit: the same gradients as without recomputation, a smaller plan.
    auto plain = session("none");
    auto fitted = session("auto", limit);
    double l_fit = 0, l_plain = 0;
    const auto g_fit = fitted->gradients(batch(2), &l_fit);
    const auto g_plain = plain->gradients(batch(2), &l_plain);
    EXPECT_EQ(l_fit, l_plain);
    for (const auto& [name, grad] : g_plain) EXPECT_TRUE(bit_identical(grad, g_fit.at(name))) << name;
    EXPECT_LT(fitted->planned_peak_bytes(), plain->planned_peak_bytes());
    EXPECT_LE(fitted->planned_peak_bytes(), limit) << "the planned arena is over the limit auto fitted";
    const std::string report = fitted->memory_report();
    EXPECT_NE(report.find("recompute: "), std::string::npos) << report;
    EXPECT_EQ(report.find("recompute: 0 of"), std::string::npos) << report;
}

TEST_F(RecomputeTest, AnUnreachableLimitIsAClearError) {
    try {
        auto s = session("auto", 1024);
        (void)s->planned_peak_bytes();
        FAIL() << "expected an OutOfMemory error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
        EXPECT_NE(std::string(e.what()).find("1024 bytes"), std::string::npos) << e.what();
    }
    EXPECT_THROW(session("auto", 0), Error);        // auto without a limit
    EXPECT_THROW(session("sometimes"), Error);      // not a mode
}

}  // namespace
}  // namespace kiln
