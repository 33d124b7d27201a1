// Pipeline-parallel checkpoints (src/distributed/pipeline_checkpoint.h) under mpiexec, on the MLP
// of mlp_test_model.h, one stage per rank:
//  - a pipeline that saves after step 1 and a fresh pipeline that loads it and runs steps 2-3
//    end bitwise equal to one pipeline running 3 steps (SGD with momentum and Adam: the optimizer
//    state and the step count travel too);
//  - the file is TrainingSession's: a TrainingSession loads it and holds the pipeline's
//    parameters bit for bit, and a pipeline loads a TrainingSession's checkpoint;
//  - a checkpoint of another optimizer, or with a tensor missing or of another shape, is a
//    kInvalidArgument naming the tensor, on every rank (the load has no transfer: no hang), also
//    on the ranks that skip that tensor;
//  - each stage copies only its own tensors out of the file (compiler::read_checkpoint's `keep`,
//    with the stage's checkpoint_names()): they equal the whole read's bit for bit, the others
//    are skipped with their types, and a flipped byte in a skipped tensor is still the checksum
//    error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "compiler/training_checkpoint.h"
#include "distributed/collectives.h"
#include "distributed/pipeline_parallel.h"
#include "pipeline_test_model.h"

namespace kiln::distributed {
namespace {

using namespace kiln::distributed::testing;
namespace fs = std::filesystem;

Communicator& comm() { return Communicator::get(); }

/// Every rank gets here before any goes on (an allreduce of one value).
void barrier() {
    std::vector<NamedTensor> ts{{"barrier", Tensor(DType::kInt32, {1})}};
    allreduce(comm(), ts, ReduceOp::kSum);
}

/// A directory every rank names alike: rank 0's pid, broadcast.
fs::path shared_dir() {
    Tensor pid(DType::kInt64, {1});
    pid.data_as<int64_t>()[0] = ::getpid();
    std::vector<NamedTensor> ts{{"pid", pid}};
    broadcast(comm(), ts, 0);
    const fs::path dir = fs::temp_directory_path() / ("kiln_pp_ckpt_" + std::to_string(ts[0].tensor.get_i64(0)));
    fs::create_directories(dir);
    return dir;
}

PipelineParallelOptions micro() {
    PipelineParallelOptions po;
    po.microbatches = kMicro;
    return po;
}

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0) << what << " differs";
}

/// The text of the Error `f` throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        return e.what();
    }
    return "";
}

TEST(PipelineCheckpoint, ResumedRunEqualsAnUninterruptedOne) {
    const std::string model = model_path();
    const std::string path = (shared_dir() / "resume.kiln").string();
    for (const char* optimizer : {"sgd", "adam"}) {
        PipelineParallel straight(comm(), model, options(optimizer), micro());
        for (int step = 0; step < 3; ++step) straight.step(batch_of(step));
        {
            PipelineParallel first(comm(), model, options(optimizer), micro());
            first.step(batch_of(0));
            first.save_checkpoint(path, {{"epoch", "0"}});
        }
        barrier();  // rank 0 has written the file
        PipelineParallel resumed(comm(), model, options(optimizer), micro());
        const std::map<std::string, std::string> extra = resumed.load_checkpoint(path);
        EXPECT_EQ(extra.at("epoch"), "0");
        EXPECT_EQ(extra.at("pipeline_stages"), resumed.stage_split());
        EXPECT_EQ(resumed.steps(), 1);
        for (int step = 1; step < 3; ++step) resumed.step(batch_of(step));
        for (const std::string& p : resumed.stage().parameter_names())
            expect_bitwise(resumed.stage().parameter(p), straight.stage().parameter(p),
                           std::string(optimizer) + " " + p);
        barrier();  // every rank has read the file before the next round rewrites it
    }
}

TEST(PipelineCheckpoint, IsTrainingSessionsFormatBothWays) {
    const std::string model = model_path();
    const fs::path dir = shared_dir();
    const std::string from_pp = (dir / "from_pp.kiln").string(), from_session = (dir / "from_session.kiln").string();
    PipelineParallel pp(comm(), model, options("adam"), micro());
    pp.step(batch_of(0));
    pp.save_checkpoint(from_pp, {});
    std::map<std::string, Tensor> gathered = pp.gather_parameters();
    auto session = TrainingSession::create(model, options("adam"));
    session->train_step(batch_of(0));
    session->train_step(batch_of(1));
    if (comm().rank() == 0) session->save_checkpoint(from_session);
    barrier();
    // A session takes the pipeline's checkpoint: the parameters rank 0 gathered, bit for bit.
    auto loaded = TrainingSession::create(model, options("adam"));
    loaded->load_checkpoint(from_pp);
    EXPECT_EQ(loaded->step(), 1);
    for (const auto& [name, t] : gathered) expect_bitwise(loaded->parameter(name), t, "session from pipeline: " + name);
    // A pipeline takes the session's: each stage its own parameters, and the step.
    PipelineParallel back(comm(), model, options("adam"), micro());
    back.load_checkpoint(from_session);
    EXPECT_EQ(back.steps(), 2);
    for (const std::string& p : back.stage().parameter_names())
        expect_bitwise(back.stage().parameter(p), session->parameter(p), "pipeline from session: " + p);
    barrier();
}

TEST(PipelineCheckpoint, AnotherModelOrOptimizerIsAnErrorNamingTheTensor) {
    const std::string model = model_path();
    const fs::path dir = shared_dir();
    const std::string good = (dir / "sgd.kiln").string(), reshaped = (dir / "reshaped.kiln").string(),
                      missing = (dir / "missing.kiln").string();
    {
        PipelineParallel sgd(comm(), model, options("sgd"), micro());
        sgd.step(batch_of(0));
        sgd.save_checkpoint(good, {});
    }
    barrier();
    if (comm().rank() == 0) {
        compiler::Checkpoint c = compiler::read_checkpoint(good);
        c.tensors["param:W1"] = Tensor(DType::kFloat32, {kHidden, kHidden + 1});
        compiler::write_checkpoint(reshaped, c);
        c = compiler::read_checkpoint(good);
        c.tensors.erase("state:opt/b2/momentum");
        compiler::write_checkpoint(missing, c);
    }
    barrier();
    PipelineParallel adam(comm(), model, options("adam"), micro());
    std::string e = error_of([&] { adam.load_checkpoint(good); });
    EXPECT_NE(e.find("has no tensor 'state:opt/W0/exp_avg'"), std::string::npos) << e;
    PipelineParallel sgd(comm(), model, options("sgd"), micro());
    e = error_of([&] { sgd.load_checkpoint(reshaped); });
    EXPECT_NE(e.find("tensor 'param:W1' is f32[32,33], this model's is f32[32,32]"), std::string::npos) << e;
    e = error_of([&] { sgd.load_checkpoint(missing); });
    EXPECT_NE(e.find("has no tensor 'state:opt/b2/momentum'"), std::string::npos) << e;
    EXPECT_EQ(sgd.steps(), 0);  // nothing was taken from a refused checkpoint
    // The pipeline still trains afterwards.
    EXPECT_TRUE(std::isfinite(sgd.step(batch_of(0))));
    barrier();
}

TEST(PipelineCheckpoint, EachStageCopiesOnlyItsOwnTensors) {
    const std::string model = model_path();
    const fs::path dir = shared_dir();
    const std::string path = (dir / "own.kiln").string(), flipped = (dir / "flipped.kiln").string();
    PipelineParallel pp(comm(), model, options("adam"), micro());
    pp.step(batch_of(0));
    pp.save_checkpoint(path, {});
    barrier();
    const std::set<std::string> own = pp.checkpoint_names();
    ASSERT_FALSE(own.empty());
    auto keep = [&](const std::string& name) { return own.count(name) > 0; };
    const compiler::Checkpoint whole = compiler::read_checkpoint(path);
    const compiler::Checkpoint mine = compiler::read_checkpoint(path, keep);
    EXPECT_TRUE(whole.skipped.empty());
    EXPECT_EQ(mine.tensors.size(), own.size());
    EXPECT_EQ(mine.tensors.size() + mine.skipped.size(), whole.tensors.size());
    EXPECT_FALSE(mine.skipped.empty()) << "every stage owns part of the model";
    EXPECT_EQ(mine.step, whole.step);
    EXPECT_EQ(mine.extra, whole.extra);
    for (const auto& [name, t] : whole.tensors) {
        if (keep(name)) {
            ASSERT_TRUE(mine.tensors.count(name)) << name;
            expect_bitwise(mine.tensors.at(name), t, name);
        } else {
            ASSERT_TRUE(mine.skipped.count(name)) << name;
            EXPECT_EQ(mine.skipped.at(name), std::make_pair(t.dtype(), t.shape())) << name;
        }
    }
    // A byte flipped in the middle of the file: the checksum still covers what is skipped.
    if (comm().rank() == 0) {
        std::string bytes(fs::file_size(path), '\0');
        FILE* f = std::fopen(path.c_str(), "rb");
        ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
        std::fclose(f);
        bytes[bytes.size() / 2] ^= 0x40;
        f = std::fopen(flipped.c_str(), "wb");
        std::fwrite(bytes.data(), 1, bytes.size(), f);
        std::fclose(f);
    }
    barrier();
    try {
        compiler::read_checkpoint(flipped, [](const std::string&) { return false; });
        ADD_FAILURE() << "a flipped byte was not noticed";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("is corrupt or truncated (checksum mismatch"), std::string::npos)
            << e.what();
    }
    barrier();
}

}  // namespace
}  // namespace kiln::distributed
