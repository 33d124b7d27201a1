// kiln-run-artifact (tools/kiln_run_artifact/, linked with libkiln_runtime alone): runs an
// artifact on .npy inputs and writes .npy outputs equal to the reference; refuses ONNX files
// with the runtime-only library's message.
#include <sys/wait.h>

#include <cstdio>
#include <cstring>

#include "artifact_test_util.h"
#include "support/npy.h"

namespace kiln::runtime::testing {
namespace {

struct Result {
    int status = -1;
    std::string output;  // stdout and stderr
};

Result run_tool(const std::string& args) {
    const std::string cmd = std::string(KILN_BINARY_DIR) + "/bin/kiln-run-artifact " + args + " 2>&1";
    Result r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

TEST(RunArtifactTool, RunsNpyInputsToNpyOutputs) {
    ScratchDir dir;
    const std::string model = dir.file("model.kiln");
    save_artifact(model, *make_test_executable(), test_library_path(), {});
    const Tensor x = test_input(6);
    write_npy(dir.file("x.npy"), x);
    Result r = run_tool(model + " --input x=" + dir.file("x.npy") + " --output-dir " + dir.file("out") +
                        " --repeat 3 --threads 1");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("load_ms="), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("run_ms="), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("output y: f32[2,3,4]"), std::string::npos) << r.output;
    const Tensor y = read_npy(dir.file("out/y.npy"));
    const Tensor ref = reference_output(x);
    ASSERT_EQ(y.shape(), ref.shape());
    EXPECT_EQ(std::memcmp(y.data(), ref.data(), ref.nbytes()), 0);
}

TEST(RunArtifactTool, RefusesWhatIsNotAnArtifact) {
    ScratchDir dir;
    write_bytes(dir.file("model.onnx"), std::string("\x08\x07\x12\x04test", 8));
    Result r = run_tool(dir.file("model.onnx"));
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("is not a Kiln artifact: this is the runtime-only library (libkiln_runtime); compile ONNX "
                            "models with `kiln compile` or link libkiln"),
              std::string::npos)
        << r.output;
    r = run_tool(dir.file("missing.kiln"));
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("cannot open '" + dir.file("missing.kiln") + "'"), std::string::npos) << r.output;
    // A bad input names it.
    save_artifact(dir.file("m.kiln"), *make_test_executable(), test_library_path(), {});
    write_npy(dir.file("bad.npy"), Tensor(DType::kFloat32, {3}));
    r = run_tool(dir.file("m.kiln") + " --input x=" + dir.file("bad.npy"));
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("input 'x': expected f32[2,3,4], got f32[3]"), std::string::npos) << r.output;
    r = run_tool("");
    EXPECT_EQ(r.status, 2) << r.output;
}

}  // namespace
}  // namespace kiln::runtime::testing
