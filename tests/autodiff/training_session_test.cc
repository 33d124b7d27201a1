// TrainingSession on a small MLP built here with the ONNX protobuf API.
//
// The optimizers are checked against a float64 re-implementation of PyTorch's update formulas
// written in this file, applied to the gradients TrainingSession::gradients returns for the
// same parameters (an independent reference of the update rule; the cross-check of the
// gradients themselves against PyTorch is tests/training, the numerical one tests/autodiff's
// gradient checks). Schedules are checked against their closed forms, checkpoints by a
// resumed run that must match an uninterrupted one bit for bit, export by running the exported
// model in a kiln::Session.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "../frontend/onnx_model_builder.h"
#include "kiln/session.h"
#include "support/npy.h"
#include "kiln/training.h"

namespace kiln {
namespace {

using namespace kiln::frontend::testing;
namespace fs = std::filesystem;

constexpr int64_t kN = 6, kIn = 4, kHidden = 8, kClasses = 3;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

/// logits = MatMul(Relu(Gemm(x, W1, b1, transB=1)), W2) + b2; x: [N, 4] with N symbolic.
onnx::ModelProto mlp_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), kIn});
    add_float_init(g, "W1", {kHidden, kIn}, random_floats(kHidden * kIn, 1, 0.6f));
    add_float_init(g, "b1", {kHidden}, random_floats(kHidden, 2, 0.2f));
    add_float_init(g, "W2", {kHidden, kClasses}, random_floats(kHidden * kClasses, 3, 0.6f), /*raw=*/true);
    add_float_init(g, "b2", {kClasses}, random_floats(kClasses, 4, 0.2f));
    attr_int(add_node(g, "Gemm", {"x", "W1", "b1"}, {"h"}, "fc1"), "transB", 1);
    add_node(g, "Relu", {"h"}, {"r"}, "relu");
    add_node(g, "MatMul", {"r", "W2"}, {"mm"}, "fc2");
    add_node(g, "Add", {"mm", "b2"}, {"logits"}, "bias2");
    add_output(g, "logits", {std::string("N"), kClasses});
    return m;
}

std::map<std::string, Tensor> make_batch(uint32_t seed) {
    Tensor x(DType::kFloat32, {kN, kIn});
    std::vector<float> v = random_floats(kN * kIn, seed, 1.5f);
    std::copy(v.begin(), v.end(), x.data_as<float>());
    Tensor y(DType::kInt64, {kN});
    for (int64_t i = 0; i < kN; ++i) y.data_as<int64_t>()[i] = (i * 7 + seed) % kClasses;
    return {{"x", x}, {"labels", y}};
}

std::vector<double> to_f64(const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
    return v;
}

/// PyTorch's torch.optim update (1.13, single-tensor), in float64: one parameter.
struct RefState {
    std::vector<double> buf, m, v;
};

void ref_update(const OptimizerOptions& o, double lr, int64_t step, std::vector<double>& p, std::vector<double> g,
                RefState& s) {
    const size_t n = p.size();
    if (o.kind == "sgd") {
        for (size_t i = 0; i < n; ++i) g[i] += o.weight_decay * p[i];
        if (o.momentum > 0) {
            if (s.buf.empty()) s.buf = g;  // PyTorch: the first step's buffer is the gradient
            else
                for (size_t i = 0; i < n; ++i) s.buf[i] = o.momentum * s.buf[i] + g[i];
            for (size_t i = 0; i < n; ++i) g[i] = o.nesterov ? g[i] + o.momentum * s.buf[i] : s.buf[i];
        }
        for (size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
        return;
    }
    if (s.m.empty()) s.m.assign(n, 0.0), s.v.assign(n, 0.0);
    if (o.kind == "adamw")
        for (size_t i = 0; i < n; ++i) p[i] *= 1 - lr * o.weight_decay;
    else
        for (size_t i = 0; i < n; ++i) g[i] += o.weight_decay * p[i];
    const double t = static_cast<double>(step + 1);
    const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
    for (size_t i = 0; i < n; ++i) {
        s.m[i] = o.beta1 * s.m[i] + (1 - o.beta1) * g[i];
        s.v[i] = o.beta2 * s.v[i] + (1 - o.beta2) * g[i] * g[i];
        const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + o.eps;
        p[i] -= lr / bc1 * s.m[i] / denom;
    }
}

class TrainingSessionTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln_training_test_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
        model_ = (dir_ / "mlp.onnx").string();
        std::ofstream f(model_, std::ios::binary);
        mlp_model().SerializeToOstream(&f);
    }
    void TearDown() override { fs::remove_all(dir_); }

    TrainingOptions options(OptimizerOptions opt) const {
        TrainingOptions o;
        o.session.dims = {{"N", kN}};
        o.session.threads = 1;
        o.optimizer = std::move(opt);
        return o;
    }

    /// Trains `steps` steps; before each, the reference takes the session's parameters and the
    /// gradients at them and applies the float64 update; the step's parameters must match it.
    void check_against_reference(const OptimizerOptions& opt, int steps, LrSchedule schedule = {}) {
        TrainingOptions o = options(opt);
        o.schedule = schedule;
        auto s = TrainingSession::create(model_, o);
        std::map<std::string, RefState> state;
        for (int step = 0; step < steps; ++step) {
            auto batch = make_batch(static_cast<uint32_t>(10 + step));
            double loss_g = 0;
            std::map<std::string, Tensor> grads = s->gradients(batch, &loss_g);
            ASSERT_EQ(grads.size(), s->parameter_names().size());
            // Global-norm clipping (torch.nn.utils.clip_grad_norm_), before the optimizer.
            std::map<std::string, std::vector<double>> g64;
            double sq = 0;
            for (const auto& [name, g] : grads) {
                g64[name] = to_f64(g);
                for (double x : g64[name]) sq += x * x;
            }
            if (opt.clip_norm > 0) {
                const double coef = std::min(opt.clip_norm / (std::sqrt(sq) + 1e-6), 1.0);
                for (auto& [name, g] : g64)
                    for (double& x : g) x *= coef;
            }
            std::map<std::string, std::vector<double>> expected;
            const double lr = schedule.at(step, opt.lr);
            for (const std::string& name : s->parameter_names()) {
                expected[name] = to_f64(s->parameter(name));
                ref_update(opt, lr, step, expected[name], g64[name], state[name]);
            }
            StepResult r = s->train_step(batch);
            EXPECT_NEAR(r.loss, loss_g, 1e-6 * std::max(1.0, std::abs(loss_g))) << "step " << step;
            EXPECT_EQ(s->step(), step + 1);
            ASSERT_EQ(r.outputs.size(), 1u);
            EXPECT_EQ(r.outputs[0].shape(), (Shape{kN, kClasses}));
            for (const std::string& name : s->parameter_names()) {
                std::vector<double> got = to_f64(s->parameter(name));
                const std::vector<double>& want = expected[name];
                ASSERT_EQ(got.size(), want.size());
                for (size_t i = 0; i < got.size(); ++i)
                    ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-5 * std::abs(want[i]))
                        << opt.kind << " step " << step << " parameter " << name << "[" << i << "]";
            }
        }
    }

    fs::path dir_;
    std::string model_;
};

OptimizerOptions sgd(double lr, double momentum = 0, bool nesterov = false, double wd = 0) {
    OptimizerOptions o;
    o.kind = "sgd";
    o.lr = lr;
    o.momentum = momentum;
    o.nesterov = nesterov;
    o.weight_decay = wd;
    return o;
}

OptimizerOptions adam(const std::string& kind, double lr, double wd = 0) {
    OptimizerOptions o;
    o.kind = kind;
    o.lr = lr;
    o.weight_decay = wd;
    return o;
}

TEST_F(TrainingSessionTest, SgdMatchesReference) { check_against_reference(sgd(0.1), 4); }
TEST_F(TrainingSessionTest, SgdWeightDecayMatchesReference) { check_against_reference(sgd(0.1, 0, false, 0.05), 3); }
TEST_F(TrainingSessionTest, MomentumMatchesReference) { check_against_reference(sgd(0.05, 0.9), 5); }
TEST_F(TrainingSessionTest, NesterovMatchesReference) { check_against_reference(sgd(0.05, 0.9, true, 0.01), 5); }
TEST_F(TrainingSessionTest, AdamMatchesReference) { check_against_reference(adam("adam", 0.01), 5); }
TEST_F(TrainingSessionTest, AdamL2MatchesReference) { check_against_reference(adam("adam", 0.01, 0.1), 4); }
TEST_F(TrainingSessionTest, AdamWMatchesReference) { check_against_reference(adam("adamw", 0.01, 0.1), 5); }

TEST_F(TrainingSessionTest, ClippingMatchesReference) {
    OptimizerOptions o = sgd(0.1, 0.9);
    o.clip_norm = 0.05;  // well below the gradients' norm: the clip is active
    check_against_reference(o, 3);
    OptimizerOptions a = adam("adam", 0.01);
    a.clip_norm = 1e3;  // above it: no change
    check_against_reference(a, 2);
}

TEST_F(TrainingSessionTest, ScheduledLearningRateMatchesReference) {
    LrSchedule s;
    s.kind = "step";
    s.step_size = 2;
    s.gamma = 0.5;
    s.warmup_steps = 1;
    check_against_reference(sgd(0.2, 0.5), 5, s);
}

TEST_F(TrainingSessionTest, LossDecreases) {
    auto s = TrainingSession::create(model_, options(adam("adam", 0.05)));
    auto batch = make_batch(7);
    const double first = s->train_step(batch).loss;
    double last = first;
    for (int i = 0; i < 30; ++i) last = s->train_step(batch).loss;
    EXPECT_LT(last, 0.5 * first);
}

TEST(LrSchedule, ClosedForms) {
    LrSchedule c;
    EXPECT_DOUBLE_EQ(c.at(0, 0.3), 0.3);
    EXPECT_DOUBLE_EQ(c.at(1000, 0.3), 0.3);
    LrSchedule st;
    st.kind = "step";
    st.step_size = 3;
    st.gamma = 0.1;
    EXPECT_DOUBLE_EQ(st.at(2, 1.0), 1.0);
    EXPECT_NEAR(st.at(3, 1.0), 0.1, 1e-15);
    EXPECT_NEAR(st.at(8, 1.0), 0.01, 1e-15);
    LrSchedule cos;
    cos.kind = "cosine";
    cos.total_steps = 10;
    cos.min_lr = 0.1;
    EXPECT_DOUBLE_EQ(cos.at(0, 1.0), 1.0);
    EXPECT_NEAR(cos.at(5, 1.0), 0.55, 1e-12);          // halfway: the mean of lr and min_lr
    EXPECT_NEAR(cos.at(10, 1.0), 0.1, 1e-12);
    EXPECT_NEAR(cos.at(25, 1.0), 0.1, 1e-12);          // stays at min_lr
    EXPECT_NEAR(cos.at(2, 1.0), 0.1 + 0.9 * (1 + std::cos(M_PI * 0.2)) / 2, 1e-12);
    LrSchedule w = cos;
    w.warmup_steps = 4;
    EXPECT_DOUBLE_EQ(w.at(0, 1.0), 0.0);
    EXPECT_NEAR(w.at(2, 1.0), cos.at(2, 1.0) * 0.5, 1e-12);
    EXPECT_NEAR(w.at(4, 1.0), cos.at(4, 1.0), 1e-12);
    LrSchedule bad;
    bad.kind = "linear";
    EXPECT_THROW(bad.at(0, 1.0), Error);
    st.step_size = 0;
    EXPECT_THROW(st.at(0, 1.0), Error);
}

TEST_F(TrainingSessionTest, ApplyGradientsEqualsTrainStep) {
    OptimizerOptions o = adam("adamw", 0.02, 0.05);
    o.clip_norm = 0.5;
    auto a = TrainingSession::create(model_, options(o));
    TrainingOptions split = options(o);
    split.split_step = true;  // compiles the gradients and apply graphs up front instead
    auto b = TrainingSession::create(model_, split);
    for (int step = 0; step < 3; ++step) {
        auto batch = make_batch(static_cast<uint32_t>(30 + step));
        a->train_step(batch);
        b->apply_gradients(b->gradients(batch));
        EXPECT_EQ(b->step(), step + 1);
    }
    for (const std::string& name : a->parameter_names()) {
        std::vector<double> x = to_f64(a->parameter(name)), y = to_f64(b->parameter(name));
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-6) << name << "[" << i << "]";
    }
}

std::map<std::string, std::vector<double>> all_params(TrainingSession& s) {
    std::map<std::string, std::vector<double>> p;
    for (const std::string& name : s.parameter_names()) p[name] = to_f64(s.parameter(name));
    return p;
}

TEST_F(TrainingSessionTest, CheckpointResumesExactly) {
    auto s = TrainingSession::create(model_, options(adam("adam", 0.02)));
    for (int i = 0; i < 2; ++i) s->train_step(make_batch(static_cast<uint32_t>(i)));
    const std::string ckpt = (dir_ / "step2.ckpt").string();
    s->save_checkpoint(ckpt, {{"epoch", "1"}, {"position", "12345"}});
    for (int i = 2; i < 5; ++i) s->train_step(make_batch(static_cast<uint32_t>(i)));
    auto straight = all_params(*s);

    // A fresh session (zero optimizer state, initial parameters) resumes from the file.
    auto r = TrainingSession::create(model_, options(adam("adam", 0.02)));
    auto extra = r->load_checkpoint(ckpt);
    EXPECT_EQ(extra.at("epoch"), "1");
    EXPECT_EQ(extra.at("position"), "12345");
    EXPECT_EQ(r->step(), 2);
    for (int i = 2; i < 5; ++i) r->train_step(make_batch(static_cast<uint32_t>(i)));
    EXPECT_EQ(all_params(*r), straight);  // bit for bit: same inputs, same kernels
    // The same session rewinds too.
    s->load_checkpoint(ckpt);
    for (int i = 2; i < 5; ++i) s->train_step(make_batch(static_cast<uint32_t>(i)));
    EXPECT_EQ(all_params(*s), straight);
}

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_all(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST_F(TrainingSessionTest, CorruptCheckpointIsAClearError) {
    auto s = TrainingSession::create(model_, options(sgd(0.1, 0.9)));
    s->train_step(make_batch(1));
    const std::string ckpt = (dir_ / "a.ckpt").string();
    s->save_checkpoint(ckpt);
    const std::string good = read_all(ckpt);
    auto before = all_params(*s);

    for (size_t keep : {good.size() - 1, good.size() / 2, size_t{20}, size_t{3}, size_t{0}}) {
        write_all(ckpt, good.substr(0, keep));
        std::string e = error_of([&] { s->load_checkpoint(ckpt); });
        EXPECT_NE(e.find(ckpt), std::string::npos) << e;
        EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("not a Kiln training checkpoint") != std::string::npos)
            << "kept " << keep << " bytes: " << e;
    }
    std::string flipped = good;
    flipped[good.size() / 2] ^= 0x5a;
    write_all(ckpt, flipped);
    EXPECT_NE(error_of([&] { s->load_checkpoint(ckpt); }).find("corrupt"), std::string::npos);
    EXPECT_EQ(all_params(*s), before);  // a failed load changes nothing
    EXPECT_EQ(s->step(), 1);
    EXPECT_NE(error_of([&] { s->load_checkpoint((dir_ / "missing.ckpt").string()); }).find("no such file"), std::string::npos);

    // Another optimizer's checkpoint names the tensor it lacks.
    write_all(ckpt, good);
    auto a = TrainingSession::create(model_, options(adam("adam", 0.01)));
    std::string e = error_of([&] { a->load_checkpoint(ckpt); });
    EXPECT_NE(e.find("optimizer state"), std::string::npos) << e;
    EXPECT_NE(e.find("exp_avg"), std::string::npos) << e;
}

TEST_F(TrainingSessionTest, FailedSaveKeepsThePreviousCheckpoint) {
    auto s = TrainingSession::create(model_, options(sgd(0.1)));
    const std::string ckpt = (dir_ / "keep.ckpt").string();
    s->save_checkpoint(ckpt, {{"epoch", "0"}});
    const std::string old_bytes = read_all(ckpt);
    s->train_step(make_batch(3));
    // The temporary file cannot be created (a directory stands in its place): the save fails.
    fs::create_directories(ckpt + ".tmp");
    EXPECT_NE(error_of([&] { s->save_checkpoint(ckpt, {{"epoch", "1"}}); }).find(ckpt), std::string::npos);
    EXPECT_EQ(read_all(ckpt), old_bytes);
    EXPECT_EQ(s->load_checkpoint(ckpt).at("epoch"), "0");
    EXPECT_EQ(s->step(), 0);
    fs::remove_all(ckpt + ".tmp");
    s->save_checkpoint(ckpt, {{"epoch", "1"}});
    EXPECT_FALSE(fs::exists(ckpt + ".tmp"));
    EXPECT_EQ(s->load_checkpoint(ckpt).at("epoch"), "1");
}

TEST_F(TrainingSessionTest, ExportedModelRunsWithTrainedParameters) {
    auto s = TrainingSession::create(model_, options(sgd(0.2, 0.9)));
    for (int i = 0; i < 3; ++i) s->train_step(make_batch(static_cast<uint32_t>(i)));
    const std::string out = (dir_ / "trained.onnx").string();
    s->export_onnx(out);
    auto batch = make_batch(99);
    StepResult ev = s->eval_step(batch);
    SessionOptions so;
    so.dims = {{"N", kN}};
    so.threads = 1;
    auto inf = Session::load(out, so);
    std::vector<Tensor> y = inf->run({{"x", batch.at("x")}});
    ASSERT_EQ(y.size(), 1u);
    std::vector<double> a = to_f64(y[0]), b = to_f64(ev.outputs[0]);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
    // KILN_TRAINING_EXPORT_DIR: keep the model, input and eval output there (for a check of the
    // export with ONNX Runtime: python3 -c "import onnxruntime, numpy ...").
    if (const char* keep = std::getenv("KILN_TRAINING_EXPORT_DIR")) {
        fs::copy_file(out, fs::path(keep) / "trained.onnx", fs::copy_options::overwrite_existing);
        write_npy((fs::path(keep) / "x.npy").string(), batch.at("x"));
        write_npy((fs::path(keep) / "logits.npy").string(), ev.outputs[0]);
    }
    // And the original model gives other outputs: the export holds the trained values.
    auto orig = Session::load(model_, so);
    std::vector<double> c = to_f64(orig->run({{"x", batch.at("x")}})[0]);
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - c[i]));
    EXPECT_GT(diff, 1e-3);
}

TEST_F(TrainingSessionTest, BatchInputsAndEval) {
    auto s = TrainingSession::create(model_, options(sgd(0.1)));
    const auto& in = s->batch_inputs();
    ASSERT_EQ(in.size(), 2u);
    EXPECT_EQ(in[0].name, "x");
    EXPECT_EQ(in[0].shape, (std::vector<int64_t>{kN, kIn}));
    EXPECT_EQ(in[1].name, "labels");
    EXPECT_EQ(in[1].dtype, DType::kInt64);
    EXPECT_EQ(in[1].shape, (std::vector<int64_t>{kN}));
    EXPECT_EQ(s->parameter_names(), (std::vector<std::string>{"W1", "b1", "W2", "b2"}));
    auto batch = make_batch(5);
    StepResult e1 = s->eval_step(batch);
    StepResult e2 = s->eval_step(batch);
    EXPECT_EQ(e1.loss, e2.loss);  // eval changes nothing
    EXPECT_EQ(s->step(), 0);
    double gl = 0;
    s->gradients(batch, &gl);
    EXPECT_NEAR(e1.loss, gl, 1e-6);
    // Cross-entropy of the eval logits, computed here.
    const Tensor& z = e1.outputs[0];
    double ce = 0;
    for (int64_t i = 0; i < kN; ++i) {
        double mx = -1e30, sum = 0;
        for (int64_t k = 0; k < kClasses; ++k) mx = std::max(mx, z.get_f64(i * kClasses + k));
        for (int64_t k = 0; k < kClasses; ++k) sum += std::exp(z.get_f64(i * kClasses + k) - mx);
        ce -= z.get_f64(i * kClasses + batch.at("labels").get_i64(i)) - mx - std::log(sum);
    }
    EXPECT_NEAR(e1.loss, ce / kN, 1e-5);
    EXPECT_GT(s->planned_peak_bytes(), 0u);
    EXPECT_FALSE(s->memory_report().empty());
}

TEST_F(TrainingSessionTest, TrainableSubsetLeavesOthersAlone) {
    TrainingOptions o = options(sgd(0.5));
    o.trainable = {"b2", "W2"};
    auto s = TrainingSession::create(model_, o);
    EXPECT_EQ(s->parameter_names(), (std::vector<std::string>{"W2", "b2"}));
    auto w2 = to_f64(s->parameter("W2"));
    s->train_step(make_batch(1));
    EXPECT_NE(to_f64(s->parameter("W2")), w2);
    EXPECT_NE(error_of([&] { s->parameter("W1"); }).find("W1"), std::string::npos);
}

TEST_F(TrainingSessionTest, BadOptionsAreClearErrors) {
    auto expect_error = [&](TrainingOptions o, const std::string& needle) {
        std::string e = error_of([&] { TrainingSession::create(model_, o); });
        EXPECT_NE(e.find(needle), std::string::npos) << "expected '" << needle << "' in: " << e;
    };
    TrainingOptions o = options(sgd(0.1));
    o.optimizer.kind = "rmsprop";
    expect_error(o, "rmsprop");
    o = options(sgd(0.1, 0, /*nesterov=*/true));
    expect_error(o, "nesterov");
    o = options(adam("adam", 0.1));
    o.optimizer.beta2 = 1.0;
    expect_error(o, "beta2");
    o = options(sgd(-1));
    expect_error(o, "lr");
    o = options(sgd(0.1));
    o.loss.kind = "hinge";
    expect_error(o, "hinge");
    o = options(sgd(0.1));
    o.loss.output = "probabilities";
    expect_error(o, "probabilities");
    o = options(sgd(0.1));
    o.loss.kind = "output";
    expect_error(o, "scalar");
    o = options(sgd(0.1));
    o.loss.labels = "x";
    expect_error(o, "labels input 'x'");
    o = options(sgd(0.1));
    o.trainable = {"W9"};
    expect_error(o, "W9");
    o = options(sgd(0.1));
    o.schedule.kind = "cosine";
    expect_error(o, "total_steps");
    o = options(sgd(0.1));
    o.session.dims.clear();
    expect_error(o, "N");
    o = options(sgd(0.1));
    o.recompute = "always";
    expect_error(o, "always");
    expect_error(options(sgd(0.1)), "(no error)");

    auto s = TrainingSession::create(model_, options(sgd(0.1)));
    auto batch = make_batch(1);
    auto no_labels = batch;
    no_labels.erase("labels");
    EXPECT_NE(error_of([&] { s->train_step(no_labels); }).find("labels"), std::string::npos);
    auto wrong = batch;
    wrong["x"] = Tensor(DType::kFloat32, {kN + 1, kIn});
    EXPECT_NE(error_of([&] { s->train_step(wrong); }).find("[7,4]"), std::string::npos);
    auto extra = batch;
    extra["y"] = batch.at("x");
    EXPECT_NE(error_of([&] { s->train_step(extra); }).find("'y'"), std::string::npos);
    EXPECT_NE(error_of([&] { s->set_parameter("W1", Tensor(DType::kFloat32, {2})); }).find("shape"), std::string::npos);
    EXPECT_NE(error_of([&] { s->apply_gradients({}); }).find("no gradient"), std::string::npos);
    EXPECT_EQ(s->step(), 0);
}

}  // namespace
}  // namespace kiln
