// DataParallel (src/distributed/data_parallel.h) on a fake TrainingSession, under mpiexec: the
// parameters broadcast from rank 0, the gradients the optimizer receives are the mean of every
// rank's, the loss is the mean of the ranks' losses, and the buckets go in reverse parameter
// order within the byte limit. References are computed here from each rank's known gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "distributed/data_parallel.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

Communicator& comm() { return Communicator::get(); }

/// Parameters p0 (f32[5]), p1 (f32[3]), p2 (f32[7]); rank r's gradient of p_k, element i, is
/// r * 10 + k + i / 4 (exact in f32 and in the mean over 2 or 3 ranks up to rounding).
class FakeSession : public TrainingSession {
public:
    explicit FakeSession(int rank) : rank_(rank) {
        for (int k = 0; k < 3; ++k) {
            Tensor t(DType::kFloat32, {kSizes[k]});
            for (int64_t i = 0; i < kSizes[k]; ++i) t.set_f64(i, 100 * rank + k);
            params_["p" + std::to_string(k)] = t;
        }
    }
    static constexpr int64_t kSizes[3] = {5, 3, 7};
    static double grad(int rank, int k, int64_t i) { return rank * 10 + k + i / 4.0; }

    const std::vector<TensorInfo>& batch_inputs() const override { return inputs_; }
    StepResult train_step(const std::map<std::string, Tensor>&) override { return {}; }
    StepResult eval_step(const std::map<std::string, Tensor>&) override { return {}; }
    std::map<std::string, Tensor> gradients(const std::map<std::string, Tensor>&, double* loss) override {
        std::map<std::string, Tensor> g;
        for (int k = 0; k < 3; ++k) {
            Tensor t(DType::kFloat32, {kSizes[k]});
            for (int64_t i = 0; i < kSizes[k]; ++i) t.set_f64(i, grad(rank_, k, i));
            g["p" + std::to_string(k)] = t;
        }
        *loss = 1.0 + rank_;
        return g;
    }
    void apply_gradients(const std::map<std::string, Tensor>& grads) override { applied = grads; }
    int64_t step() const override { return 0; }
    std::vector<std::string> parameter_names() const override { return {"p0", "p1", "p2"}; }
    Tensor parameter(const std::string& name) const override { return params_.at(name); }
    void set_parameter(const std::string& name, const Tensor& value) override { params_[name] = value.clone(); }
    void save_checkpoint(const std::string&, const std::map<std::string, std::string>&) const override {}
    std::map<std::string, std::string> load_checkpoint(const std::string&) override { return {}; }
    void export_onnx(const std::string&) const override {}
    std::string memory_report() override { return ""; }
    size_t planned_peak_bytes() override { return 0; }

    std::map<std::string, Tensor> applied;

private:
    int rank_;
    std::vector<TensorInfo> inputs_;
    std::map<std::string, Tensor> params_;
};

// The communication thread runs where the node has a core to spare: never when the node's ranks'
// compute threads take every core; an explicit setting wins. The node's ranks are this job's
// on one host (all of them under mpiexec here; 1 each across network namespaces).
TEST(DataParallel, CommunicationThreadOnlyWhereACoreIsSpare) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    EXPECT_GE(comm().local_size(), 1);
    EXPECT_LE(comm().local_size(), comm().size());
    DataParallelOptions o;
    o.comm_thread = -1;
    o.compute_threads = cores;
    EXPECT_FALSE(o.use_comm_thread(comm())) << "no core is spare when each rank computes on every core";
    o.compute_threads = 0;  // unknown: every core
    EXPECT_FALSE(o.use_comm_thread(comm()));
    o.compute_threads = 1;
    EXPECT_EQ(o.use_comm_thread(comm()), comm().local_size() < cores);
    o.comm_thread = 1;
    o.compute_threads = cores;
    EXPECT_TRUE(o.use_comm_thread(comm()));
    o.comm_thread = 0;
    o.compute_threads = 1;
    EXPECT_FALSE(o.use_comm_thread(comm()));
}

TEST(DataParallel, BroadcastsRankZerosParameters) {
    FakeSession s(comm().rank());
    DataParallel dp(comm(), s);
    dp.broadcast_parameters();
    for (int k = 0; k < 3; ++k) {
        Tensor p = s.parameter("p" + std::to_string(k));
        for (int64_t i = 0; i < p.numel(); ++i) ASSERT_EQ(p.get_f64(i), k);  // rank 0's: 100 * 0 + k
    }
}

TEST(DataParallel, AveragesGradientsInReverseOrderBuckets) {
    const int n = comm().size();
    FakeSession s(comm().rank());
    // A 32-byte limit: p2 (28 bytes) fills the first bucket, p1 (12) + p0 (20) = 32 the second,
    // where the loss rides along uncounted. The fake session has no runtime reports: its
    // gradients all come in after the backward pass (gradients_as_ready's default).
    DataParallel dp(comm(), s, {.bucket_bytes = 32});
    double loss = dp.step({});
    double mean_loss = 0;
    for (int r = 0; r < n; ++r) mean_loss += (1.0 + r) / n;
    EXPECT_DOUBLE_EQ(loss, mean_loss);
    ASSERT_EQ(dp.buckets().size(), 2u);
    EXPECT_EQ(dp.buckets()[0], (std::vector<std::string>{"grad/p2"}));
    EXPECT_EQ(dp.buckets()[1], (std::vector<std::string>{"grad/p1", "grad/p0", "loss"}));
    EXPECT_EQ(dp.last_step_stats().started_during_backward, 0);
    ASSERT_EQ(s.applied.size(), 3u);
    for (int k = 0; k < 3; ++k) {
        const Tensor& g = s.applied.at("p" + std::to_string(k));
        for (int64_t i = 0; i < g.numel(); ++i) {
            double want = 0;
            for (int r = 0; r < n; ++r) want += FakeSession::grad(r, k, i);
            ASSERT_FLOAT_EQ(g.get_f64(i), static_cast<float>(want) / static_cast<float>(n)) << k << " " << i;
        }
    }
}

TEST(DataParallel, BucketsThatDifferAcrossRanksAreAnErrorNamingTheRank) {
    // Rank 0 makes two buckets, the others one: caught by the step's agreement check on every
    // rank before any bucket starts, not a mismatched allreduce in the backward pass.
    FakeSession s(comm().rank());
    DataParallel dp(comm(), s, {.bucket_bytes = comm().rank() == 0 ? size_t{32} : size_t{1000}});
    try {
        dp.step({});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("data-parallel step: rank 1 disagrees with rank 0"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("bucket 1: grad/p1"), std::string::npos) << e.what();
    }
    DataParallel same(comm(), s, {.bucket_bytes = 32});  // the communicator still works
    EXPECT_EQ(same.step({}), 1.0 + (comm().size() - 1) / 2.0);
}

TEST(DataParallel, SyncBatchNormNeedsASessionThatCanBuildItsGraph) {
    // The fake has no training graphs to rebuild with global statistics: a clear error at
    // construction, on every rank alike, before any collective.
    FakeSession s(comm().rank());
    try {
        DataParallel dp(comm(), s, {.sync_batch_norm = true});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find("sync_batch_norm: the session is not one of TrainingSession::create"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace kiln::distributed
