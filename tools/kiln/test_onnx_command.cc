// `kiln test-onnx`: run ONNX backend node tests (one directory with model.onnx, or a directory of
// them) and print one line per test: "PASS name", "FAIL name: reason", "UNSUPPORTED name: reason",
// then "<P> passed, <F> failed, <U> unsupported". Each test runs in a forked child (see
// forked_runner.h) so a crash or hang is reported as that test's FAIL; lines are printed in test
// order whatever order the children finish in. Exit status 1 when any test failed.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "forked_runner.h"
#include "onnx_test_case.h"
#include "support/error.h"

namespace kiln::cli {
namespace {
namespace fs = std::filesystem;

struct TestOnnxArgs {
    std::string dir;
    std::string filter;
    bool verbose = false;
    int jobs = 2;
    int threads = 1;
    int opt_level = 3;
    std::string kernels = "auto";
    double timeout = 60;
    double rtol = 1e-3;
    double atol = 1e-5;
};

struct TestCase {
    std::string name;
    fs::path dir;
};

std::vector<TestCase> find_tests(const fs::path& root, const std::string& filter) {
    KILN_CHECK(fs::is_directory(root), kIOError)
        << "test directory '" << root.string() << "' does not exist";
    std::vector<TestCase> tests;
    if (fs::is_regular_file(root / "model.onnx")) {
        fs::path canonical = fs::weakly_canonical(root);
        tests.push_back({canonical.filename().string(), root});
    } else {
        for (const auto& entry : fs::directory_iterator(root)) {
            if (entry.is_directory() && fs::is_regular_file(entry.path() / "model.onnx"))
                tests.push_back({entry.path().filename().string(), entry.path()});
        }
        KILN_CHECK(!tests.empty(), kInvalidArgument)
            << "no ONNX tests in '" << root.string()
            << "': expected model.onnx there or in its subdirectories";
        std::sort(tests.begin(), tests.end(),
                  [](const TestCase& a, const TestCase& b) { return a.name < b.name; });
    }
    std::erase_if(tests,
                  [&](const TestCase& t) { return t.name.find(filter) == std::string::npos; });
    return tests;
}

/// Child side: run the test and encode the outcome as "STATUS\nreason\nseconds\ndetails".
std::string run_in_child(const TestCase& test, const OnnxTestOptions& opts) {
    auto t0 = std::chrono::steady_clock::now();
    TestOutcome out = run_onnx_test(test.dir.string(), opts);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fmt::format("{}\n{}\n{:.3f}\n{}", test_status_name(out.status), out.reason, seconds,
                       out.details);
}

struct Report {
    TestStatus status = TestStatus::kFail;
    std::string line;     // what is printed for the test
    std::string details;  // extra lines for --verbose
};

/// Every line of `text` prefixed with four spaces.
std::string indent(const std::string& text) {
    std::string out = "    ";
    for (char c : text) out += c == '\n' ? std::string("\n    ") : std::string(1, c);
    return out;
}

/// Parent side: decode a child's payload, or describe how it died.
Report decode(const TestCase& test, const ChildResult& r) {
    Report rep;
    if (!r.ok) {
        rep.line = fmt::format("FAIL {}: {}", test.name, r.failure);
        return rep;
    }
    std::vector<std::string> parts;
    size_t start = 0;
    for (int k = 0; k < 3; ++k) {
        size_t nl = r.payload.find('\n', start);
        if (nl == std::string::npos) break;
        parts.push_back(r.payload.substr(start, nl - start));
        start = nl + 1;
    }
    if (parts.size() < 3) {
        rep.line = fmt::format("FAIL {}: the test process sent a malformed result", test.name);
        return rep;
    }
    const std::string& status = parts[0];
    const std::string& reason = parts[1];
    rep.details = fmt::format("    time: {} s", parts[2]);
    std::string rest = r.payload.substr(start);
    while (!rest.empty() && rest.back() == '\n') rest.pop_back();
    if (!rest.empty()) rep.details = indent(rest) + "\n" + rep.details;
    if (status == "PASS") {
        rep.status = TestStatus::kPass;
        rep.line = fmt::format("PASS {}", test.name);
    } else {
        rep.status = status == "UNSUPPORTED" ? TestStatus::kUnsupported : TestStatus::kFail;
        rep.line = fmt::format("{} {}: {}", test_status_name(rep.status), test.name, reason);
    }
    return rep;
}

int test_onnx(const TestOnnxArgs& args) {
    std::vector<TestCase> tests = find_tests(args.dir, args.filter);
    OnnxTestOptions opts;
    opts.threads = args.threads;
    opts.opt_level = args.opt_level;
    opts.kernels = args.kernels;
    opts.tolerance = {args.rtol, args.atol};
    ForkedRunnerOptions run_opts;
    run_opts.jobs = args.jobs;
    run_opts.timeout_seconds = args.timeout;
    run_opts.quiet_children = !args.verbose;

    std::vector<std::optional<Report>> reports(tests.size());
    size_t printed = 0;
    int counts[3] = {0, 0, 0};
    run_forked(
        tests.size(), [&](size_t i) { return run_in_child(tests[i], opts); },
        [&](size_t i, const ChildResult& r) {
            reports[i] = decode(tests[i], r);
            for (; printed < reports.size() && reports[printed]; ++printed) {
                const Report& rep = *reports[printed];
                ++counts[static_cast<int>(rep.status)];
                fmt::print("{}\n", rep.line);
                if (args.verbose && !rep.details.empty()) fmt::print("{}\n", rep.details);
                std::fflush(stdout);
            }
        },
        run_opts);
    fmt::print("{} passed, {} failed, {} unsupported\n",
               counts[static_cast<int>(TestStatus::kPass)],
               counts[static_cast<int>(TestStatus::kFail)],
               counts[static_cast<int>(TestStatus::kUnsupported)]);
    return counts[static_cast<int>(TestStatus::kFail)] == 0 ? 0 : 1;
}

}  // namespace

void add_test_onnx_command(CLI::App& app, CommandAction& action) {
    auto args = std::make_shared<TestOnnxArgs>();
    CLI::App* sub = app.add_subcommand(
        "test-onnx", "Run ONNX backend node tests (model.onnx + test_data_set_*)");
    sub->add_option("dir", args->dir, "A test directory, or a directory of test directories")
        ->required();
    sub->add_option("--filter", args->filter, "Run only tests whose name contains SUBSTR")
        ->type_name("SUBSTR");
    sub->add_flag("--verbose,-v", args->verbose,
                  "Show error details, timings and the tests' own output");
    sub->add_option("--jobs,-j", args->jobs, "Tests run at once, each in its own process")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    add_opt_level_option(sub, args->opt_level);
    add_kernels_option(sub, args->kernels);
    sub->add_option("--threads", args->threads, "Intra-op threads per test (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--timeout", args->timeout, "Seconds before a test is killed")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--rtol", args->rtol, "Relative tolerance for float outputs")
        ->capture_default_str();
    sub->add_option("--atol", args->atol, "Absolute tolerance for float outputs")
        ->capture_default_str();
    sub->callback([args, &action] { action = [args] { return test_onnx(*args); }; });
}

}  // namespace kiln::cli
