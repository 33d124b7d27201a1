// kiln::Session over a compiled artifact: through load_artifact_session and through
// Session::load's dispatch (libkiln), its inputs/outputs, checked runs, options and reports.
#include <atomic>
#include <cstring>
#include <thread>

#include "artifact_test_util.h"
#include "kiln/session.h"

namespace kiln::runtime::testing {
namespace {

std::string save_test_artifact(const ScratchDir& dir, ArtifactInfo info = {}, bool concurrent = false) {
    const std::string path = dir.file("model.kiln");
    auto exe = make_test_executable();
    exe->planned_for_concurrency = concurrent;
    if (info.metadata.empty()) info.metadata = {{"producer", "artifact_session_test"}, {"dims", "N=2"}};
    save_artifact(path, *exe, test_library_path(), info);
    return path;
}

void expect_reference(const std::vector<Tensor>& outs, const Tensor& x) {
    ASSERT_EQ(outs.size(), 1u);
    const Tensor ref = reference_output(x);
    ASSERT_EQ(outs[0].shape(), ref.shape());
    for (int64_t i = 0; i < ref.numel(); ++i) EXPECT_EQ(outs[0].data_as<float>()[i], ref.data_as<float>()[i]) << i;
}

TEST(ArtifactSession, DescribesItsInputsAndOutputsAndRuns) {
    ScratchDir dir;
    auto s = load_artifact_session(save_test_artifact(dir), {});
    ASSERT_EQ(s->inputs().size(), 1u);
    EXPECT_EQ(s->inputs()[0].name, "x");
    EXPECT_EQ(s->inputs()[0].dtype, DType::kFloat32);
    EXPECT_EQ(s->inputs()[0].shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(s->inputs()[0].symbols, (std::vector<std::string>{"", "", ""}));
    ASSERT_EQ(s->outputs().size(), 1u);
    EXPECT_EQ(s->outputs()[0].name, "y");
    for (int seed = 0; seed < 3; ++seed) expect_reference(s->run({{"x", test_input(seed)}}), test_input(seed));
    std::vector<Datum> values = s->run_values({{"x", Datum(test_input(5))}});
    ASSERT_EQ(values.size(), 1u);
    expect_reference({values[0].tensor()}, test_input(5));
    const SessionStats st = s->stats();
    EXPECT_EQ(st.kernels, 3);
    EXPECT_EQ(st.compiled, 0);
    EXPECT_EQ(st.executor, "sequential");
    EXPECT_GT(st.load_seconds, 0);
}

TEST(ArtifactSession, SessionLoadDispatchesOnTheMagic) {
    ScratchDir dir;
    // Any file name: the magic decides, not the extension.
    const std::string path = save_test_artifact(dir);
    std::filesystem::rename(path, dir.file("model.bin"));
    auto s = Session::load(dir.file("model.bin"));
    expect_reference(s->run({{"x", test_input(1)}}), test_input(1));
    EXPECT_NE(s->inspect().find("compiled Kiln artifact"), std::string::npos);
}

TEST(ArtifactSession, BadInputsAreNamedWithExpectedAndGot) {
    ScratchDir dir;
    auto s = load_artifact_session(save_test_artifact(dir), {});
    Error e = error_of([&] { s->run({}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.message(), "missing input 'x'");
    e = error_of([&] { s->run({{"x", Tensor(DType::kFloat32, {2, 3, 5})}}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("input 'x': expected f32[2,3,4], got f32[2,3,5]"), std::string::npos) << e.what();
    e = error_of([&] { s->run({{"x", Tensor(DType::kInt64, {2, 3, 4})}}); });
    EXPECT_NE(e.message().find("input 'x': expected f32[2,3,4], got i64[2,3,4]"), std::string::npos) << e.what();
    e = error_of([&] { s->run({{"x", test_input(0)}, {"z", test_input(0)}}); });
    EXPECT_NE(e.message().find("'z' is not an input of the model (inputs: 'x')"), std::string::npos) << e.what();
    e = error_of([&] { s->run_values({{"x", Datum::none()}}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("input 'x': expected a tensor"), std::string::npos) << e.what();
}

TEST(ArtifactSession, OptionsThatContradictTheArtifactAreRefused) {
    ScratchDir dir;
    const std::string path = save_test_artifact(dir);
    SessionOptions o;
    o.dims = {{"N", 4}};
    Error e = error_of([&] { load_artifact_session(path, o); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("dimension 'N': '" + path + "' was compiled with N=2, got N=4"), std::string::npos)
        << e.what();
    o.dims = {{"N", 2}};  // agreeing dims are fine
    EXPECT_NO_THROW(load_artifact_session(path, o));
    o.dims = {{"N", 2}, {"n", 7}};  // a misspelt one is not
    e = error_of([&] { load_artifact_session(path, o); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("dimension 'n': '" + path + "' was compiled with no dimension of that name (its dims: N=2)"),
              std::string::npos)
        << e.what();
    ScratchDir damaged_dir;
    ArtifactInfo damaged;
    damaged.metadata = {{"producer", "artifact_session_test"}, {"dims", "N=2,S"}};
    const std::string damaged_path = save_test_artifact(damaged_dir, damaged);
    o.dims = {{"N", 2}};
    e = error_of([&] { load_artifact_session(damaged_path, o); });
    EXPECT_NE(e.message().find("its metadata 'dims' holds 'S', expected NAME=INTEGER"), std::string::npos) << e.what();
    o = {};
    o.print_after = {"fuse_operators"};
    e = error_of([&] { load_artifact_session(path, o); });
    EXPECT_NE(e.message().find("holds no IR to print"), std::string::npos) << e.what();
    o = {};
    o.executor = ExecutorKind::kDataflow;
    e = error_of([&] { load_artifact_session(path, o); });
    EXPECT_NE(e.message().find("was compiled for sequential execution"), std::string::npos) << e.what();
    o.threads = -1;
    o.executor = ExecutorKind::kAuto;
    e = error_of([&] { load_artifact_session(path, o); });
    EXPECT_NE(e.message().find("intra-op threads must be >= 0, got -1"), std::string::npos) << e.what();
    // Options fixed at compile time are ignored.
    o = {};
    o.opt_level = 0;
    o.kernels = "generated";
    o.tuning_log = "/no/such/log";
    EXPECT_NO_THROW(load_artifact_session(path, o));
}

TEST(ArtifactSession, DataflowRunsAnArtifactPlannedForConcurrency) {
    ScratchDir dir;
    SessionOptions o;
    o.executor = ExecutorKind::kDataflow;
    o.inter_op_threads = 2;
    auto s = load_artifact_session(save_test_artifact(dir, {}, /*concurrent=*/true), o);
    EXPECT_EQ(s->stats().executor, "dataflow");
    expect_reference(s->run({{"x", test_input(4)}}), test_input(4));
}

TEST(ArtifactSession, RunsFromSeveralThreadsAndStopsWhenTerminated) {
    ScratchDir dir;
    auto s = load_artifact_session(save_test_artifact(dir), {});
    std::vector<std::thread> threads;
    std::atomic<int> good{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int r = 0; r < 20; ++r) {
                const Tensor x = test_input(t * 100 + r);
                const Tensor y = s->run({{"x", x}})[0];
                good += std::memcmp(y.data(), reference_output(x).data(), y.nbytes()) == 0;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(good.load(), 80);
    std::atomic<bool> stop{true};
    RunOptions ro;
    ro.terminate = &stop;
    Error e = error_of([&] { s->run({{"x", test_input(0)}}, ro); });
    EXPECT_EQ(e.kind(), ErrorKind::kCancelled);
}

TEST(ArtifactSession, ReportsDescribeTheArtifact) {
    ScratchDir dir;
    SessionOptions o;
    o.profile = true;
    o.profile_path = dir.file("trace.json");
    auto s = load_artifact_session(save_test_artifact(dir), o);
    (void)s->run({{"x", test_input(0)}});
    EXPECT_EQ(s->kernel_list(),
              "kernel 0: Add (node 'add1')\nkernel 1: Mul+Relu (node 'mul_relu1')\n"
              "kernel 2: Copy (node 'copy1') [kiln_async_copy]\n3 kernels\n");
    const std::string text = s->inspect();
    EXPECT_NE(text.find("//   producer: artifact_session_test"), std::string::npos) << text;
    EXPECT_NE(text.find("//   x: f32[2,3,4]"), std::string::npos) << text;
    EXPECT_NE(text.find("kernel 1: Mul+Relu (node 'mul_relu1'): t:f32[2,3,4] w:f32[4] -> u:f32[2,3,4]"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("2 constants (112 bytes, mapped from the file), 2 intermediates (arena 256 bytes)"),
              std::string::npos)
        << text;
    const std::string mem = s->memory_report();
    EXPECT_EQ(mem.rfind("arena: 256\nconstants: 112 (mapped from the artifact, not copied)\nallocator: ", 0), 0u) << mem;
    EXPECT_NE(s->profile_summary(5).find("Add"), std::string::npos) << s->profile_summary(5);
    s->write_profile();
    EXPECT_GT(std::filesystem::file_size(dir.file("trace.json")), 10u);
}

TEST(ArtifactSession, MemoryReportOfTheCompilerIsShownWhenRecorded) {
    ScratchDir dir;
    ArtifactInfo info;
    info.metadata = {{"memory_report", "arena: 256\nnaive sum: 288\nlower bound: 192\n"}};
    auto s = load_artifact_session(save_test_artifact(dir, info), {});
    EXPECT_EQ(s->memory_report().rfind("arena: 256\nnaive sum: 288\nlower bound: 192\nconstants: 112", 0), 0u)
        << s->memory_report();
    EXPECT_EQ(s->inspect().find("naive sum"), std::string::npos) << "the report is not metadata to list";
}

}  // namespace
}  // namespace kiln::runtime::testing
