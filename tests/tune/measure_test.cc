// The local measurer against hand-written kernels: a correct candidate is timed, a wrong one is
// rejected against the reference, a crashing or hanging one costs only itself (the candidates
// after it are still measured), a compile error is recorded; and the tuning log's records.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/error.h"
#include "tune/measure.h"
#include "tune/tuning_log.h"

namespace kiln::tune {
namespace {

/// A kernel y[i] = body(x[i]) over 4096 floats, in the kernel ABI (runtime/kernel_abi.h).
std::string kernel(const std::string& body, const std::string& prologue = "") {
    return "#include <stdint.h>\n#include <stdlib.h>\n"
           "typedef struct kiln_kernel_env { void* pool; void (*parallel_for)(void*, int64_t, void (*)(int64_t, int64_t, void*), void*); } kiln_kernel_env;\n"
           "int32_t kiln_kernel(void* const* args, const kiln_kernel_env* env) {\n"
           "  const float* x = (const float*)args[0]; float* y = (float*)args[1];\n  " + prologue +
           "\n  for (int i = 0; i < 4096; ++i) y[i] = " + body + ";\n  return 0;\n}\n";
}

MeasureTask task_of(const std::vector<std::string>& sources) {
    MeasureTask t;
    t.workload = "double";
    t.args = {{DType::kFloat32, {4096}, false, false}, {DType::kFloat32, {4096}, true, false}};
    t.flops = 4096;
    for (size_t i = 0; i < sources.size(); ++i) t.candidates.push_back({"v=" + std::to_string(i), sources[i], "", "", ""});
    return t;
}

MeasureOptions options() {
    MeasureOptions o;
    o.worker = std::string(KILN_BINARY_DIR) + "/bin/kiln";
    o.timeout_s = 2;
    o.repeats = 3;
    o.min_repeat_ms = 0.2;
    return o;
}

TEST(LocalMeasurer, FailuresCostOnlyTheirCandidate) {
    if (!std::filesystem::exists(options().worker)) GTEST_SKIP() << "kiln binary not built";
    auto m = make_local_measurer();
    std::vector<std::string> sources = {
        kernel("2.0f * x[i]"),                                  // 0: the reference
        kernel("x[i] + x[i]"),                                  // 1: the same values
        kernel("3.0f * x[i]"),                                  // 2: wrong
        kernel("2.0f * x[i]", "if (x) { volatile int* p = 0; *p = 1; }"),  // 3: crashes
        kernel("2.0f * x[i]"),                                  // 4: after the crash: measured
        kernel("2.0f * x[i]", "for (volatile int k = 1; k; ) {}"),        // 5: hangs
        kernel("2.0f * x[i] +"),                                // 6: does not compile
        kernel("x[i] * 2.0f"),                                  // 7: after the hang: measured
    };
    std::vector<MeasureResult> r = m->measure(task_of(sources), options());
    ASSERT_EQ(r.size(), sources.size());
    EXPECT_TRUE(r[0].ok) << r[0].error;
    EXPECT_TRUE(r[1].ok) << r[1].error;
    EXPECT_GT(r[1].seconds, 0);
    EXPECT_FALSE(r[2].ok);
    EXPECT_NE(r[2].error.find("wrong result"), std::string::npos) << r[2].error;
    EXPECT_FALSE(r[3].ok);
    EXPECT_NE(r[3].error.find("crashed: signal 11"), std::string::npos) << r[3].error;
    EXPECT_TRUE(r[4].ok) << r[4].error;
    EXPECT_FALSE(r[5].ok);
    EXPECT_NE(r[5].error.find("timed out after 2 s"), std::string::npos) << r[5].error;
    EXPECT_FALSE(r[6].ok);
    EXPECT_NE(r[6].error.find("compile error"), std::string::npos) << r[6].error;
    EXPECT_TRUE(r[7].ok) << r[7].error;
}

TEST(LocalMeasurer, BrokenReferenceFailsEveryCandidate) {
    if (!std::filesystem::exists(options().worker)) GTEST_SKIP() << "kiln binary not built";
    auto m = make_local_measurer();
    std::vector<MeasureResult> r =
        m->measure(task_of({kernel("2.0f * x[i]", "abort();"), kernel("2.0f * x[i]")}), options());
    ASSERT_EQ(r.size(), 2u);
    EXPECT_FALSE(r[0].ok);
    EXPECT_FALSE(r[1].ok);
    EXPECT_NE(r[1].error.find("reference failed"), std::string::npos) << r[1].error;
}

TEST(LocalMeasurer, MissingWorkerIsAClearError) {
    auto m = make_local_measurer();
    MeasureOptions o = options();
    o.worker = "/nonexistent/kiln";
    EXPECT_THROW(m->measure(task_of({kernel("2.0f * x[i]")}), o), Error);
}

TEST(TuningLog, ReadsBackBestPerThreadsAndSkipsBadLines) {
    const std::string path = testing::TempDir() + "/kiln_tuning_log_test.jsonl";
    std::remove(path.c_str());
    auto rec = [](const std::string& w, int threads, const std::string& knobs, double s) {
        TuningRecord r;
        r.workload = w;
        r.target = "cpu | avx512";
        r.threads = threads;
        r.knobs = knobs;
        r.seconds = s;
        return r;
    };
    TuningLog::append(path, rec("w1", 2, "a=1", 3e-3));
    TuningLog::append(path, rec("w1", 2, "a=2", 2e-3));
    TuningLog::append(path, rec("w1", 1, "a=3", 1e-3));
    TuningLog::append(path, rec("w2", 1, "b=4", 5e-3));
    {
        std::ofstream f(path, std::ios::app);
        f << "{\"v\":99,\"workload\":\"w1\"}\n" << "not json\n" << "{\"v\":1,\"workload\":\"w1\",\"target\":\"cpu | avx512\",";
    }
    TuningLog log = TuningLog::read(path);
    EXPECT_EQ(log.records().size(), 4u);
    EXPECT_EQ(log.skipped(), 3);
    EXPECT_EQ(log.best("w1", "cpu | avx512", 2)->knobs, "a=2");  // fastest at the same threads
    EXPECT_EQ(log.best("w1", "cpu | avx512", 4)->knobs, "a=3");  // else fastest at any
    EXPECT_FALSE(log.best("w1", "other cpu | avx2", 2).has_value());
    auto best = log.best_knobs("cpu | avx512", 2);
    EXPECT_EQ(best.at("w1").values.at("a"), 2);
    EXPECT_EQ(best.at("w2").values.at("b"), 4);
    EXPECT_TRUE(TuningLog::read(path + ".missing").records().empty());
    // A setting measured again is judged by its mean: a=2 (2 ms, then 5 ms) loses to a=1 (3 ms).
    TuningLog::append(path, rec("w1", 2, "a=2", 5e-3));
    TuningLog again = TuningLog::read(path);
    EXPECT_EQ(again.best("w1", "cpu | avx512", 2)->knobs, "a=1");
    EXPECT_DOUBLE_EQ(again.best("w1", "cpu | avx512", 2)->seconds, 3e-3);
}

TEST(TuningLog, RejectedVerdictDropsEarlierRecordsOfItsWorkloadAndTarget) {
    const std::string path = testing::TempDir() + "/kiln_tuning_verdict_test.jsonl";
    std::remove(path.c_str());
    auto rec = [](const std::string& w, const std::string& target, const std::string& knobs, const std::string& verdict) {
        TuningRecord r;
        r.workload = w;
        r.target = target;
        r.threads = 2;
        r.knobs = knobs;
        r.seconds = 1e-3;
        r.verdict = verdict;
        return r;
    };
    TuningLog::append(path, rec("w1", "cpu", "a=1", ""));
    TuningLog::append(path, rec("w2", "cpu", "b=1", ""));
    TuningLog::append(path, rec("w1", "other", "a=5", ""));
    TuningLog::append(path, rec("w1", "cpu", "a=0", "rejected"));
    TuningLog log = TuningLog::read(path);
    EXPECT_FALSE(log.best("w1", "cpu", 2).has_value());        // rejected: the default applies
    EXPECT_EQ(log.best("w1", "other", 2)->knobs, "a=5");       // another target is untouched
    EXPECT_EQ(log.best("w2", "cpu", 2)->knobs, "b=1");         // another workload too
    auto best = log.best_knobs("cpu", 2);
    EXPECT_FALSE(best.count("w1"));
    EXPECT_EQ(best.at("w2").values.at("b"), 1);
    EXPECT_EQ(log.targets(), (std::vector<std::string>{"cpu", "other"}));
    TuningLog::append(path, rec("w1", "cpu", "a=2", ""));      // a later search counts again
    EXPECT_EQ(TuningLog::read(path).best("w1", "cpu", 2)->knobs, "a=2");
}

TEST(TuningLog, GeneratedRecordsCountOnlyInTheNewestKnobSpace) {
    const std::string path = testing::TempDir() + "/kiln_tuning_space_test.jsonl";
    std::remove(path.c_str());
    auto rec = [](const std::string& knobs, const std::string& space, double s) {
        TuningRecord r;
        r.workload = "w1";
        r.target = "cpu";
        r.threads = 2;
        r.knobs = knobs;
        r.space = space;
        r.seconds = s;
        return r;
    };
    TuningLog::append(path, rec("a=1,source=0", "old", 1e-3));   // fast, but in a space since changed
    TuningLog::append(path, rec("a=2,source=0", "new", 3e-3));
    TuningLog::append(path, rec("a=3,source=0", "new", 2e-3));
    TuningLog log = TuningLog::read(path);
    ASSERT_EQ(log.records().size(), 3u);
    EXPECT_EQ(log.records()[0].space, "old");  // written and read back
    auto best = log.best_knobs("cpu", 2);
    EXPECT_EQ(best.at("w1").values.at("a"), 3);
    EXPECT_EQ(best.at("w1").space, "new");
    TuningLog::append(path, rec("source=1", "older", 1.5e-3));  // a oneDNN choice has no schedule space
    EXPECT_EQ(TuningLog::read(path).best("w1", "cpu", 2)->knobs, "source=1");
    std::ifstream f(path);
    std::string first;
    std::getline(f, first);
    EXPECT_NE(first.find("\"space\":\"old\""), std::string::npos) << first;
}

}  // namespace
}  // namespace kiln::tune
