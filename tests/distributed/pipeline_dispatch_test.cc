// PipelineParallel under master dispatch (src/distributed/pipeline_dispatch.cc,
// pipeline_parallel.h's file comment) under mpiexec: rank 0 builds every stage of the 4-layer MLP
// of mlp_test_model.h and ships it; the workers are given a model path that does not exist, so
// everything they compute comes from the master. Against the same pipeline with every rank
// reading the model (PipelineDispatch::kReplicated, itself checked against one TrainingSession in
// pipeline_parallel_test.cc), bit for bit: each step's loss (steps ordered ahead: two enqueued
// while one runs), an evaluation's loss and logits (which the master receives from the loss
// stage), the parameters gathered on rank 0, and, after a checkpoint that a second master
// pipeline loads (the master reads the file and sends each worker its stage's tensors), the
// parameters after one more step. Adam with its state, so a checkpoint that lost the state fails.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "distributed/pipeline_parallel.h"
#include "pipeline_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;
namespace fs = std::filesystem;

Communicator& comm() { return Communicator::get(); }

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0) << what << " differs";
}

PipelineParallelOptions master_options() {
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    po.dispatch = PipelineDispatch::kMaster;
    return po;
}

/// The workers' side: the plan and then every order come from rank 0.
void serve(const PipelineParallelOptions& po) {
    PipelineParallel worker(comm(), "/nonexistent/model.onnx", options("adam"), po);
    EXPECT_TRUE(worker.is_worker());
    worker.serve();
}

TEST(PipelineDispatch, MasterDispatchComputesTheReplicatedPipelineBitForBit) {
    constexpr int kSteps = 4;
    const std::string model = model_path();
    const fs::path ckpt = fs::path(model).parent_path() / "dispatch_ckpt.kiln";
    // The reference: every rank reads the model.
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    PipelineParallel replicated(comm(), model, options("adam"), po);
    std::vector<double> losses;
    for (int s = 0; s < kSteps; ++s) losses.push_back(replicated.step(batch_of(s)));
    const std::optional<StepResult> eval = replicated.eval_step(batch_of(9));
    const double eval_loss = replicated.from_loss_stage({eval ? eval->loss : 0.0}).at(0);
    const bool last = comm().rank() == comm().size() - 1;
    Tensor logits;
    if (last) logits = eval->outputs.at(0);
    // The loss stage's logits to rank 0, for the comparison below (the test's own transfer).
    Rendezvous rv(comm());
    const TransferKey logits_key{comm().size() - 1, 1, 0, "test/logits", 0, 0, 0};
    if (last) rv.send(logits_key, logits);
    if (comm().rank() == 0) logits = rv.recv(logits_key);
    const std::map<std::string, Tensor> trained = replicated.gather_parameters();
    replicated.step(batch_of(kSteps));
    const std::map<std::string, Tensor> after = replicated.gather_parameters();

    if (comm().rank() != 0) {
        serve(master_options());  // the first master pipeline
        serve(master_options());  // the one that loads its checkpoint
        return;
    }
    {
        PipelineParallel master(comm(), model, options("adam"), master_options());
        ASSERT_TRUE(master.is_master());
        master.enqueue(batch_of(0));
        for (int s = 0; s < kSteps; ++s) {
            if (s + 1 < kSteps) master.enqueue(batch_of(s + 1));  // ordered before step s runs
            EXPECT_EQ(master.enqueued(), s + 1 < kSteps ? 2u : 1u);
            EXPECT_EQ(master.step(), losses[static_cast<size_t>(s)]) << "step " << s;
        }
        const std::optional<StepResult> got = master.eval_step(batch_of(9));
        ASSERT_TRUE(got.has_value()) << "the master holds the loss stage's evaluation";
        EXPECT_EQ(got->loss, eval_loss);
        ASSERT_EQ(got->outputs.size(), 1u);
        expect_bitwise(got->outputs[0], logits, "logits");
        const std::map<std::string, Tensor> params = master.gather_parameters();
        ASSERT_EQ(params.size(), trained.size());
        for (const auto& [name, t] : trained) expect_bitwise(params.at(name), t, name + " after the steps");
        master.save_checkpoint(ckpt.string(), {});
        master.stop();
    }
    PipelineParallel resumed(comm(), model, options("adam"), master_options());
    resumed.load_checkpoint(ckpt.string());
    EXPECT_EQ(resumed.steps(), kSteps);
    resumed.step(batch_of(kSteps));
    const std::map<std::string, Tensor> params = resumed.gather_parameters();
    for (const auto& [name, t] : after) expect_bitwise(params.at(name), t, name + " after the resumed step");
    resumed.stop();
    fs::remove(ckpt);
}

}  // namespace
}  // namespace kiln::distributed
