// Pipeline and data parallelism together (src/distributed/pipeline_groups.h, PipelineParallelOptions
// ::replicas) under mpiexec: the job's ranks as R = ranks / 2 replicas of a 2-stage pipeline over
// the 4-layer MLP of mlp_test_model.h. Replica r steps on rows [4r, 4r + 4) of each global batch
// of 4R rows (2 microbatches of 2), and the independent reference is one TrainingSession stepping
// on the whole global batch (the fused train step). After every step: the loss (every rank's must
// be the global batch's) and every parameter of the rank's stage within 1e-6 relative plus 1e-6 x
// the tensor's largest magnitude, SGD with momentum and Adam; with clip_norm (binding), the norm
// every rank reports is the session's whole gradient's. Under 4 ranks (ctest
// distributed_pipeline_data_parallel_np4) that is 2 x 2; under 2 ranks one replica, the plain
// pipeline through the same code; 3 ranks skip. The buckets overlap the last backward (and give
// the same weights without overlap). Also: the split's ranks (Communicator::split) and a stage
// count not dividing the ranks, refused on every rank before any MPI call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "distributed/collectives.h"
#include "distributed/pipeline_groups.h"
#include "distributed/pipeline_parallel.h"
#include "pipeline_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;

constexpr int kStages = 2;
constexpr int64_t kPerReplica = 4;

Communicator& world() { return Communicator::get(); }

/// Rows [first, first + count) of `t` (leading axis).
Tensor rows(const Tensor& t, int64_t first, int64_t count) {
    Shape shape = t.shape();
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(shape[0]);
    shape[0] = count;
    Tensor out(t.dtype(), shape);
    std::memcpy(out.data(), static_cast<const char*>(t.data()) + static_cast<size_t>(first) * row_bytes,
                static_cast<size_t>(count) * row_bytes);
    return out;
}

/// The global batch of `step` for R replicas: batch_of's generator at 4R rows.
std::map<std::string, Tensor> global_batch(int step, int64_t rows_total) {
    Tensor x(DType::kFloat32, {rows_total, kIn});
    std::vector<float> v = random_floats(static_cast<size_t>(rows_total * kIn), static_cast<uint32_t>(700 + step), 2.0f);
    std::copy(v.begin(), v.end(), x.data_as<float>());
    Tensor y(DType::kInt64, {rows_total});
    for (int64_t i = 0; i < rows_total; ++i) y.data_as<int64_t>()[i] = (i * 5 + step) % kClasses;
    return {{"x", x}, {"labels", y}};
}

double square_sum(const std::map<std::string, Tensor>& grads) {
    double sum = 0;
    for (const auto& [name, g] : grads)
        for (int64_t i = 0; i < g.numel(); ++i) sum += g.get_f64(i) * g.get_f64(i);
    return sum;
}

void train_and_compare(const std::string& optimizer, double clip_norm) {
    PipelineGroups g = split_pipeline_groups(world(), kStages);
    const int64_t total = kPerReplica * g.replicas;
    TrainingOptions o = options(optimizer);
    o.optimizer.clip_norm = clip_norm;
    TrainingOptions ro = o;  // the reference: one process, the whole global batch
    ro.session.dims = {{"N", total}};
    o.session.dims = {{"N", kPerReplica}};
    PipelineParallelOptions po;
    po.microbatches = 2;
    po.replicas = g.replicas_of_stage.get();
    const std::string model = model_path();
    PipelineParallel pp(*g.pipeline, model, o, po);
    auto ref = TrainingSession::create(model, ro);
    for (int step = 0; step < 3; ++step) {
        const std::map<std::string, Tensor> batch = global_batch(step, total);
        std::map<std::string, Tensor> mine;
        for (const auto& [name, t] : batch) mine[name] = rows(t, kPerReplica * g.replica, kPerReplica);
        const std::string at = optimizer + " step " + std::to_string(step);
        double norm = 0;
        if (clip_norm > 0) {
            norm = std::sqrt(square_sum(ref->gradients(batch, nullptr)));
            ASSERT_GT(norm, 2 * clip_norm) << at << ": the clip does not bind";
        }
        const double loss = pp.step(mine);
        const double want = ref->train_step(batch).loss;
        EXPECT_NEAR(loss, want, 1e-6 * std::abs(want)) << at << " on world rank " << world().rank();
        if (clip_norm > 0) {
            EXPECT_NEAR(pp.last_step_stats().grad_norm, norm, 1e-5 * norm) << at;
        }
        for (const std::string& p : pp.stage().parameter_names())
            expect_close(pp.stage().parameter(p), ref->parameter(p), at + " " + p + " on world rank " +
                                                                         std::to_string(world().rank()));
    }
}

bool runs_here() { return world().size() % kStages == 0; }

TEST(PipelineDataParallel, SgdMomentumMatchesOneProcessOnTheGlobalBatch) {
    if (!runs_here()) GTEST_SKIP() << "2 stages do not divide " << world().size() << " ranks";
    train_and_compare("sgd", 0);
}

TEST(PipelineDataParallel, AdamMatchesOneProcessOnTheGlobalBatch) {
    if (!runs_here()) GTEST_SKIP() << "2 stages do not divide " << world().size() << " ranks";
    train_and_compare("adam", 0);
}

TEST(PipelineDataParallel, ClipNormIsTheGlobalGradientsNorm) {
    if (!runs_here()) GTEST_SKIP() << "2 stages do not divide " << world().size() << " ranks";
    train_and_compare("sgd", 0.05);
    train_and_compare("adam", 0.05);
}

// The buckets (one gradient each here) start while the stage's last backward still runs: some
// before its last gradient sum is reported, none without overlap; the weights are the same bit
// for bit either way (overlap changes when a bucket's sum starts, not what it sums).
TEST(PipelineDataParallel, BucketsStartDuringTheLastBackward) {
    if (!runs_here()) GTEST_SKIP() << "2 stages do not divide " << world().size() << " ranks";
    PipelineGroups g = split_pipeline_groups(world(), kStages);
    if (g.replicas < 2) GTEST_SKIP() << "one replica: nothing to average";
    const int64_t total = kPerReplica * g.replicas;
    TrainingOptions o = options("sgd");
    o.session.dims = {{"N", kPerReplica}};
    PipelineParallelOptions po;
    po.microbatches = 2;
    po.replicas = g.replicas_of_stage.get();
    po.replica_buckets.bucket_bytes = 1;  // a bucket per gradient
    po.replica_buckets.comm_thread = 1;  // the overlap under test, whatever the machine's cores
    PipelineParallel overlapped(*g.pipeline, model_path(), o, po);
    po.replica_buckets.overlap = false;
    PipelineParallel after(*g.pipeline, model_path(), o, po);
    for (int step = 0; step < 3; ++step) {
        std::map<std::string, Tensor> mine;
        for (const auto& [name, t] : global_batch(step, total)) mine[name] = rows(t, kPerReplica * g.replica, kPerReplica);
        overlapped.step(mine);
        after.step(mine);
        const PipelineStepStats &a = overlapped.last_step_stats(), &b = after.last_step_stats();
        EXPECT_EQ(a.replica_buckets, static_cast<int>(overlapped.stage().parameter_names().size()));
        EXPECT_GE(a.replica_buckets_started_early, 1) << "step " << step << ": no bucket overlapped the backward";
        EXPECT_EQ(b.replica_buckets_started_early, 0) << "step " << step;
        for (const std::string& p : overlapped.stage().parameter_names()) {
            const Tensor &x = overlapped.stage().parameter(p), &y = after.stage().parameter(p);
            ASSERT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << p << " after step " << step;
        }
    }
}

TEST(PipelineDataParallel, GroupsTheRanksByReplicaAndStage) {
    if (!runs_here()) GTEST_SKIP() << "2 stages do not divide " << world().size() << " ranks";
    PipelineGroups g = split_pipeline_groups(world(), kStages);
    const int w = world().rank();
    EXPECT_EQ(g.replicas, world().size() / kStages);
    EXPECT_EQ(g.stage, w % kStages);
    EXPECT_EQ(g.replica, w / kStages);
    EXPECT_EQ(g.pipeline->size(), kStages);
    EXPECT_EQ(g.pipeline->rank(), g.stage);
    EXPECT_EQ(g.replicas_of_stage->size(), g.replicas);
    EXPECT_EQ(g.replicas_of_stage->rank(), g.replica);
    // A sum over each group: the world ranks it holds.
    Tensor t(DType::kInt64, {1});
    t.data_as<int64_t>()[0] = w;
    std::vector<NamedTensor> ts{{"w", t}};
    allreduce(*g.replicas_of_stage, ts, ReduceOp::kSum);
    int64_t want = 0;
    for (int r = 0; r < g.replicas; ++r) want += r * kStages + g.stage;
    EXPECT_EQ(t.data_as<int64_t>()[0], want);
}

TEST(PipelineDataParallel, RefusesStagesThatDoNotDivideTheRanks) {
    for (int stages : {1, world().size() + 1}) {
        try {
            split_pipeline_groups(world(), stages);
            FAIL() << "expected an error for " << stages << " stages";
        } catch (const Error& e) {
            const std::string want = stages == 1 ? "--pipeline-stages 1: a pipeline needs at least 2 stages"
                                                 : "--pipeline-stages " + std::to_string(stages) +
                                                       " does not divide the job's " + std::to_string(world().size()) +
                                                       " ranks";
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace kiln::distributed
