// PipelineParallel (src/distributed/pipeline_parallel.h) under mpiexec: the 4-layer MLP of
// mlp_test_model.h split into one stage per rank, trained 3 GPipe steps of a global batch of 8
// in 4 microbatches, against the independent reference of one TrainingSession stepping on the
// same global batches (the fused train step). Checked after every step: the loss, and every
// parameter this rank's stage owns, within 1e-6 relative plus 1e-6 x the tensor's largest
// magnitude, the tolerance of the data-parallel tests. Not bitwise: a parameter's gradient is a
// sum over 4 microbatches of 2 rows, against one sum over 8 rows (and Adam's g / (sqrt(v) + eps)
// magnifies the rounding of a gradient that cancels to near 0, hence Adam's eps 1e-3 below). At
// the end the parameters gathered on rank 0 cover every parameter of the model and match too.
// SGD with momentum, Adam (each with the forward's values stashed, and rematerialized), an
// annotated split (`fc2` starts rank 1; 2 ranks only), the 1F1B schedule (bitwise GPipe's
// parameters, with fewer microbatches stashed at once), a model with a skip connection (one value
// sent to two stages) and an input without a batch dim (given whole to every microbatch);
// clip_norm (the norm over every stage's gradients, against the session's clipping); evaluation
// (eval_step against the session's); and the
// refused options, thrown on every rank before any transfer. Checkpoints:
// pipeline_checkpoint_test.cc.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "distributed/pipeline_parallel.h"
#include "pipeline_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;
namespace fs = std::filesystem;

Communicator& comm() { return Communicator::get(); }

/// K steps of the pipeline against the single-process reference.
void train_and_compare(const std::string& optimizer, const StageMap& stages, bool rematerialize) {
    const std::string model = model_path();
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    po.stages = stages;
    po.rematerialize = rematerialize;
    PipelineParallel pp(comm(), model, options(optimizer), po);
    auto ref = TrainingSession::create(model, options(optimizer));
    EXPECT_FALSE(pp.stage().parameter_names().empty()) << "rank " << comm().rank() << " owns no parameter";
    for (int step = 0; step < 3; ++step) {
        const double loss = pp.step(batch_of(step));
        const double want = ref->train_step(batch_of(step)).loss;
        EXPECT_NEAR(loss, want, 1e-6 * std::abs(want)) << "step " << step;
        for (const std::string& p : pp.stage().parameter_names())
            expect_close(pp.stage().parameter(p), ref->parameter(p), p + " after step " + std::to_string(step));
    }
    std::map<std::string, Tensor> all = pp.gather_parameters();
    if (comm().rank() != 0) return;
    EXPECT_EQ(all.size(), ref->parameter_names().size());
    for (const std::string& p : ref->parameter_names()) {
        ASSERT_TRUE(all.count(p)) << p << " was not gathered";
        expect_close(all.at(p), ref->parameter(p), p + " gathered");
    }
}

TEST(PipelineParallel, SgdMomentumMatchesOneProcess) { train_and_compare("sgd", {}, false); }

TEST(PipelineParallel, AdamMatchesOneProcess) { train_and_compare("adam", {}, false); }

TEST(PipelineParallel, RematerializedMatchesOneProcess) {
    train_and_compare("sgd", {}, true);
    train_and_compare("adam", {}, true);
}

TEST(PipelineParallel, OneForwardOneBackwardStashesLessAndSumsTheSame) {
    const std::string model = model_path();
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    PipelineParallel gpipe(comm(), model, options("adam"), po);
    po.schedule = PipelineSchedule::kOneForwardOneBackward;
    PipelineParallel one_f_one_b(comm(), model, options("adam"), po);
    auto ref = TrainingSession::create(model, options("adam"));
    const int r = comm().rank(), n = comm().size();
    for (int step = 0; step < 3; ++step) {
        const double a = gpipe.step(batch_of(step)), b = one_f_one_b.step(batch_of(step));
        const double want = ref->train_step(batch_of(step)).loss;
        EXPECT_EQ(a, b) << "step " << step;
        EXPECT_NEAR(b, want, 1e-6 * std::abs(want)) << "step " << step;
        // GPipe holds every microbatch's stash at once; 1F1B at most N-r (none on the loss stage).
        EXPECT_EQ(gpipe.last_step_stats().peak_stashed, r == n - 1 ? 0 : kMicro);
        EXPECT_EQ(one_f_one_b.last_step_stats().peak_stashed, r == n - 1 ? 0 : std::min(n - r, kMicro));
        for (const std::string& p : one_f_one_b.stage().parameter_names()) {
            const Tensor &x = one_f_one_b.stage().parameter(p), &y = gpipe.stage().parameter(p);
            ASSERT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << p << ": 1F1B differs from GPipe";
            expect_close(x, ref->parameter(p), p + " (1F1B) after step " + std::to_string(step));
        }
    }
}

TEST(PipelineParallel, AnnotatedSplitMatchesOneProcess) {
    if (comm().size() != 2) GTEST_SKIP() << "the stage map names rank 1 of 2";
    train_and_compare("sgd", {{"fc2", 1}}, false);
}

/// x -> fc0 -> relu (r0) -> fc1 -> relu -> times the input `gain` (no batch dim) -> fc2, plus r0
/// (a skip connection) -> relu -> fc3 -> logits. Split with fc1 and fc2 starting stages, r0 is
/// sent to two stages (3 ranks) or read by two nodes across the cut (2 ranks).
onnx::ModelProto residual_mlp() {
    using namespace kiln::frontend::testing;
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), kIn});
    add_input(g, "gain", {kHidden});
    auto fc = [&](int l, const std::string& in, int64_t fan_in, int64_t fan_out, const std::string& out) {
        const std::string w = "W" + std::to_string(l), b = "b" + std::to_string(l);
        add_float_init(g, w, {fan_out, fan_in}, random_floats(static_cast<size_t>(fan_out * fan_in), 30 + l, 0.3f));
        add_float_init(g, b, {fan_out}, random_floats(static_cast<size_t>(fan_out), 40 + l, 0.1f));
        attr_int(add_node(g, "Gemm", {in, w, b}, {out}, "fc" + std::to_string(l)), "transB", 1);
    };
    fc(0, "x", kIn, kHidden, "h0");
    add_node(g, "Relu", {"h0"}, {"r0"}, "act0");
    fc(1, "r0", kHidden, kHidden, "h1");
    add_node(g, "Relu", {"h1"}, {"r1"}, "act1");
    add_node(g, "Mul", {"r1", "gain"}, {"g1"}, "gain1");
    fc(2, "g1", kHidden, kHidden, "h2");
    add_node(g, "Add", {"h2", "r0"}, {"s2"}, "skip");
    add_node(g, "Relu", {"s2"}, {"r2"}, "act2");
    fc(3, "r2", kHidden, kClasses, "logits");
    add_output(g, "logits", {std::string("N"), kClasses});
    return m;
}

TEST(PipelineParallel, SkipConnectionAndAnUnbatchedInputMatchOneProcess) {
    const int n = comm().size();
    if (n > 3) GTEST_SKIP() << "the stage map names ranks up to 2";
    const std::string model = (fs::path(model_path()).parent_path() / "residual.onnx").string();
    if (!fs::exists(model)) {
        std::ofstream f(model, std::ios::binary);
        residual_mlp().SerializeToOstream(&f);
    }
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    po.stages = n == 3 ? StageMap{{"fc1", 1}, {"fc2", 2}} : StageMap{{"fc2", 1}};
    PipelineParallel pp(comm(), model, options("sgd"), po);
    auto ref = TrainingSession::create(model, options("sgd"));
    Tensor gain(DType::kFloat32, {kHidden});
    for (int64_t i = 0; i < kHidden; ++i) gain.set_f64(i, 0.5 + 0.03 * static_cast<double>(i));
    for (int step = 0; step < 3; ++step) {
        std::map<std::string, Tensor> batch = batch_of(step);
        batch["gain"] = gain;
        const double loss = pp.step(batch);
        const double want = ref->train_step(batch).loss;
        EXPECT_NEAR(loss, want, 1e-6 * std::abs(want)) << "step " << step;
        for (const std::string& p : pp.stage().parameter_names())
            expect_close(pp.stage().parameter(p), ref->parameter(p), p + " after step " + std::to_string(step));
    }
    // r0 goes to every later stage: one transfer per destination, their gradients summed.
    if (comm().rank() == 0) {
        EXPECT_EQ(pp.stage().graph().send_keys.at(0).size(), static_cast<size_t>(n - 1));
    }
}

TEST(PipelineParallel, RefusesWhatItCannotDo) {
    const std::string model = model_path();
    PipelineParallelOptions po;
    po.microbatches = 3;  // does not divide 8
    try {
        PipelineParallel pp(comm(), model, options("sgd"), po);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--microbatches 3 does not divide N=8"), std::string::npos) << e.what();
    }
}

/// The square of the global L2 norm of `grads` (double).
double square_sum(const std::map<std::string, Tensor>& grads) {
    double sum = 0;
    for (const auto& [name, g] : grads)
        for (int64_t i = 0; i < g.numel(); ++i) sum += g.get_f64(i) * g.get_f64(i);
    return sum;
}

// --clip-norm: every stage scales its gradients by clip_grad_norm_'s factor of the norm over
// every stage's gradients. The reference is one TrainingSession with the same clip_norm (its
// clipping is a graph over all gradients, checked against a float64 clip_grad_norm_ in
// tests/autodiff/training_session_test.cc); the norm
// each rank reports must be the one of the session's whole gradient (numpy-style, in double),
// and the clip must bind (norm > clip_norm) at every step, so an unclipped stage would diverge.
TEST(PipelineParallel, ClipNormSpansTheStages) {
    const std::string model = model_path();
    for (const char* optimizer : {"sgd", "adam"}) {
        TrainingOptions o = options(optimizer);
        o.optimizer.clip_norm = 0.05;
        PipelineParallelOptions po;
        po.microbatches = kMicro;
        PipelineParallel pp(comm(), model, o, po);
        auto ref = TrainingSession::create(model, o);
        for (int step = 0; step < 3; ++step) {
            const double norm = std::sqrt(square_sum(ref->gradients(batch_of(step), nullptr)));
            ASSERT_GT(norm, 2 * o.optimizer.clip_norm) << optimizer << " step " << step << ": the clip does not bind";
            const double loss = pp.step(batch_of(step));
            const double want = ref->train_step(batch_of(step)).loss;
            EXPECT_NEAR(loss, want, 1e-6 * std::abs(want)) << optimizer << " step " << step;
            EXPECT_NEAR(pp.last_step_stats().grad_norm, norm, 1e-5 * norm) << optimizer << " step " << step;
            for (const std::string& p : pp.stage().parameter_names())
                expect_close(pp.stage().parameter(p), ref->parameter(p),
                             std::string(optimizer) + " " + p + " after step " + std::to_string(step));
        }
    }
}

// Evaluation: each microbatch's forward through the stages, no update. After a training step, the
// last rank's loss and logits (joined over the microbatches) are the session's eval step's, and
// from_loss_stage hands its loss to every rank.
TEST(PipelineParallel, EvalStepMatchesTheSessionsEvalStep) {
    const std::string model = model_path();
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    PipelineParallel pp(comm(), model, options("sgd"), po);
    auto ref = TrainingSession::create(model, options("sgd"));
    pp.step(batch_of(0));
    ref->train_step(batch_of(0));
    const std::optional<StepResult> got = pp.eval_step(batch_of(1));
    const StepResult want = ref->eval_step(batch_of(1));
    const bool last = comm().rank() == comm().size() - 1;
    ASSERT_EQ(got.has_value(), last);
    const std::vector<double> shared = pp.from_loss_stage({got ? got->loss : -1.0});
    EXPECT_NEAR(shared.at(0), want.loss, 1e-6 * std::abs(want.loss)) << "on rank " << comm().rank();
    if (!last) return;
    ASSERT_EQ(got->outputs.size(), 1u);
    expect_close(got->outputs[0], want.outputs.at(0), "logits");
    EXPECT_EQ(pp.steps(), 1);  // evaluation is no step
}

}  // namespace
}  // namespace kiln::distributed
