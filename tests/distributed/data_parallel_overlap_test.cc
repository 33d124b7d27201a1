// DataParallel (src/distributed/data_parallel.h) on a real TrainingSession, under mpiexec: a
// 4-layer MLP trained with every gradient in a bucket of its own, with the allreduces overlapped
// with the backward pass and without, and overlapped under the dataflow executor (whose
// inter-op threads report gradients concurrently; it must match within 1e-6). Checked each step: some bucket's allreduce started while
// the backward pass still had gradients to write (recorded by DataParallel from the runtime's
// output-ready reports; none without overlap); the two runs' parameters are bitwise equal;
// every rank holds the same parameters; and they match one session stepping on the global batch
// (every rank's batch, concatenated in rank order) within 1e-6 relative — the independent
// reference, as PyTorch tests DDP.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "distributed/collectives.h"
#include "distributed/data_parallel.h"
#include "mlp_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;
namespace fs = std::filesystem;

constexpr int64_t kB = 4;

Communicator& comm() { return Communicator::get(); }

/// Rank `rank`'s batch of step `step` (every rank can make every rank's).
std::map<std::string, Tensor> batch_of(int step, int rank) {
    Tensor x(DType::kFloat32, {kB, kIn});
    std::vector<float> v = random_floats(kB * kIn, static_cast<uint32_t>(1000 + 10 * step + rank), 2.0f);
    std::copy(v.begin(), v.end(), x.data_as<float>());
    Tensor y(DType::kInt64, {kB});
    for (int64_t i = 0; i < kB; ++i) y.data_as<int64_t>()[i] = (i * 5 + step + rank) % kClasses;
    return {{"x", x}, {"labels", y}};
}

/// Every rank's batch of `step`, concatenated along axis 0 in rank order.
std::map<std::string, Tensor> global_batch(int step, int ranks) {
    Tensor x(DType::kFloat32, {kB * ranks, kIn});
    Tensor y(DType::kInt64, {kB * ranks});
    for (int r = 0; r < ranks; ++r) {
        auto b = batch_of(step, r);
        std::memcpy(x.data_as<float>() + r * kB * kIn, b["x"].data(), b["x"].nbytes());
        std::memcpy(y.data_as<int64_t>() + r * kB, b["labels"].data(), b["labels"].nbytes());
    }
    return {{"x", x}, {"labels", y}};
}

TrainingOptions options(int64_t batch) {
    TrainingOptions o;
    o.session.dims = {{"N", batch}};
    o.session.threads = 1;
    o.optimizer.kind = "sgd";
    o.optimizer.lr = 0.1;
    o.optimizer.momentum = 0.9;
    o.split_step = true;
    return o;
}

TEST(DataParallelOverlap, StartsBucketsDuringBackwardAndMatchesOneProcess) {
    const int n = comm().size();
    const fs::path dir = fs::temp_directory_path() / ("kiln_dp_overlap_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string model = (dir / "mlp.onnx").string();
    {
        std::ofstream f(model, std::ios::binary);
        mlp().SerializeToOstream(&f);
    }
    auto on = TrainingSession::create(model, options(kB));
    auto off = TrainingSession::create(model, options(kB));
    auto ref = TrainingSession::create(model, options(kB * n));
    // The dataflow executor reports gradients from its inter-op threads, in any order.
    TrainingOptions dataflow = options(kB);
    dataflow.session.executor = ExecutorKind::kDataflow;
    dataflow.session.inter_op_threads = 2;
    auto flow = TrainingSession::create(model, dataflow);
    DataParallelOptions o;
    o.comm_thread = 1;  // the overlap under test, whatever the machine's cores
    o.bucket_bytes = 1;  // every gradient alone: 2 * kLayers buckets
    DataParallel dp_on(comm(), *on, o);
    DataParallel dp_flow(comm(), *flow, o);
    o.overlap = false;
    DataParallel dp_off(comm(), *off, o);
    for (int step = 0; step < 3; ++step) {
        const double loss_on = dp_on.step(batch_of(step, comm().rank()));
        const double loss_off = dp_off.step(batch_of(step, comm().rank()));
        (void)dp_flow.step(batch_of(step, comm().rank()));
        EXPECT_GE(dp_flow.last_step_stats().started_during_backward, 1);
        double loss_ref = 0;
        ref->apply_gradients(ref->gradients(global_batch(step, n), &loss_ref));
        EXPECT_EQ(loss_on, loss_off);
        EXPECT_NEAR(loss_on, loss_ref, 1e-6 * std::abs(loss_ref));

        const DataParallelStepStats& s = dp_on.last_step_stats();
        ASSERT_EQ(s.buckets, 2 * kLayers);
        EXPECT_GE(s.started_during_backward, 1) << "no bucket started before the backward pass's last gradient";
        EXPECT_EQ(dp_off.last_step_stats().started_during_backward, 0);
        for (const std::string& name : on->parameter_names()) {
            Tensor p = on->parameter(name), q = off->parameter(name), r = ref->parameter(name);
            ASSERT_EQ(std::memcmp(p.data(), q.data(), p.nbytes()), 0) << name << ": overlap on and off differ";
            Tensor f = flow->parameter(name);
            for (int64_t i = 0; i < p.numel(); ++i)
                ASSERT_NEAR(f.get_f64(i), p.get_f64(i), 1e-6 * std::abs(p.get_f64(i)) + 1e-7) << name << " (dataflow)";
            // The same on every rank: the min and the max over ranks equal this rank's value.
            std::vector<NamedTensor> lo{{name, p.clone()}}, hi{{name, p.clone()}};
            allreduce(comm(), lo, ReduceOp::kMin);
            allreduce(comm(), hi, ReduceOp::kMax);
            ASSERT_EQ(std::memcmp(lo[0].tensor.data(), p.data(), p.nbytes()), 0) << name;
            ASSERT_EQ(std::memcmp(hi[0].tensor.data(), p.data(), p.nbytes()), 0) << name;
            double scale = 0;
            for (int64_t i = 0; i < r.numel(); ++i) scale = std::max(scale, std::abs(r.get_f64(i)));
            for (int64_t i = 0; i < p.numel(); ++i)
                ASSERT_NEAR(p.get_f64(i), r.get_f64(i), 1e-6 * std::abs(r.get_f64(i)) + 1e-6 * scale)
                    << name << "[" << i << "] at step " << step;
        }
    }
    // Rank 0 reports how far the buckets got before the backward pass ended (for the log).
    if (comm().rank() == 0) {
        std::string at;
        for (int r : dp_on.last_step_stats().reported_at_start) at += " " + std::to_string(r);
        std::printf("buckets started after gradients:%s of %d\n", at.c_str(), dp_on.last_step_stats().gradients);
    }
    fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::distributed
