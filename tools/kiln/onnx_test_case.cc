// Running one ONNX backend node test in-process. The model is loaded without dimension bindings;
// when an input has symbolic dimensions they are bound from each data set's input shapes and the
// model is reloaded with them (the kernel cache makes the second compile cheap).
#include "onnx_test_case.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "frontend/onnx/importer.h"
#include "ir/type.h"
#include "kiln/kiln.h"

namespace kiln::cli {
namespace fs = std::filesystem;

const char* test_status_name(TestStatus s) {
    switch (s) {
        case TestStatus::kPass: return "PASS";
        case TestStatus::kFail: return "FAIL";
        case TestStatus::kUnsupported: return "UNSUPPORTED";
    }
    return "FAIL";
}

namespace {

/// Thrown inside this file to end a test early with an outcome.
struct Verdict {
    TestOutcome outcome;
};

[[noreturn]] void fail(std::string reason) {
    throw Verdict{{TestStatus::kFail, std::move(reason), ""}};
}

/// Splits a multi-line message into its first line and the rest.
std::pair<std::string, std::string> first_line(const std::string& text) {
    size_t nl = text.find('\n');
    if (nl == std::string::npos) return {text, ""};
    return {text.substr(0, nl), text.substr(nl + 1)};
}

/// Files "<prefix><index><suffix>" in `dir`, sorted by the number (input_10 after input_9).
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix,
                                     const std::string& suffix) {
    std::vector<std::pair<long, fs::path>> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        std::string digits =
            name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
        if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
        found.emplace_back(std::strtol(digits.c_str(), nullptr, 10), entry.path());
    }
    std::sort(found.begin(), found.end());
    std::vector<fs::path> out;
    for (auto& [index, path] : found) out.push_back(path);
    return out;
}

/// Reads data file i as the kind of value model input/output i is (tensor, sequence, optional).
std::vector<Datum> read_values(const std::vector<fs::path>& files, const std::vector<TensorInfo>& infos) {
    std::vector<Datum> out;
    for (size_t i = 0; i < files.size(); ++i) {
        ir::TensorType type;
        if (i < infos.size()) {
            type.dtype = infos[i].dtype;
            type.kind = static_cast<ir::TypeKind>(infos[i].kind);
        }
        try {
            out.push_back(frontend::read_value_proto_file(files[i].string(), type));
        } catch (const Error& e) {
            // Map test data, for one, is no TensorProto, SequenceProto or OptionalProto.
            throw Verdict{{e.kind() == ErrorKind::kUnsupported ? TestStatus::kUnsupported : TestStatus::kFail,
                           fmt::format("{}: {}", files[i].filename().string(), first_line(e.message()).first), ""}};
        }
    }
    return out;
}

/// Symbolic dimension values implied by the shapes of the data set's inputs.
std::map<std::string, int64_t> bind_dims(const std::vector<TensorInfo>& infos,
                                         const std::vector<Datum>& inputs) {
    std::map<std::string, int64_t> dims;
    for (size_t i = 0; i < infos.size() && i < inputs.size(); ++i) {
        const TensorInfo& info = infos[i];
        if (info.kind != ValueKind::kTensor || !inputs[i].is_tensor()) continue;
        const Shape& shape = inputs[i].tensor().shape();
        for (size_t d = 0; d < info.shape.size() && d < shape.size(); ++d) {
            if (info.shape[d] < 0 && d < info.symbols.size() && !info.symbols[d].empty())
                dims.emplace(info.symbols[d], shape[d]);
        }
    }
    return dims;
}

void run_data_set(const fs::path& model, const fs::path& set, const OnnxTestOptions& opts,
                  std::unique_ptr<Session>& session, SessionOptions& session_opts,
                  const std::string& prefix) {
    std::vector<Datum> inputs = read_values(numbered_files(set, "input_", ".pb"), session->inputs());
    std::vector<Datum> expected = read_values(numbered_files(set, "output_", ".pb"), session->outputs());

    std::map<std::string, int64_t> dims = bind_dims(session->inputs(), inputs);
    if (!dims.empty() && dims != session_opts.dims && !session->stats().interpreted) {
        session_opts.dims = dims;
        session = Session::load(model.string(), session_opts);
    }
    const std::vector<TensorInfo>& infos = session->inputs();
    if (inputs.size() > infos.size())
        fail(fmt::format("{}test data has {} inputs, the model has {}", prefix, inputs.size(),
                         infos.size()));
    std::map<std::string, Datum> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) feeds[infos[i].name] = inputs[i];

    std::vector<Datum> got = session->run_values(feeds);
    if (got.size() != expected.size())
        fail(fmt::format("{}expected {} outputs, got {}", prefix, expected.size(), got.size()));
    const std::vector<TensorInfo>& out_infos = session->outputs();
    for (size_t i = 0; i < got.size(); ++i) {
        std::string name = i < out_infos.size() ? out_infos[i].name : fmt::format("#{}", i);
        if (auto mismatch = compare_value(name, expected[i], got[i], opts.tolerance))
            fail(prefix + *mismatch);
    }
}

TestOutcome run_checked(const fs::path& dir, const OnnxTestOptions& opts) {
    fs::path model = dir / "model.onnx";
    std::vector<fs::path> sets;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.is_directory() &&
            entry.path().filename().string().rfind("test_data_set_", 0) == 0)
            sets.push_back(entry.path());
    }
    std::sort(sets.begin(), sets.end(), [](const fs::path& a, const fs::path& b) {
        auto num = [](const fs::path& p) {
            return std::strtol(p.filename().string().c_str() + std::string("test_data_set_").size(),
                               nullptr, 10);
        };
        return num(a) != num(b) ? num(a) < num(b) : a < b;
    });
    if (sets.empty()) fail("no test_data_set_* directory");

    SessionOptions session_opts;
    session_opts.threads = opts.threads;
    session_opts.opt_level = opts.opt_level;
    session_opts.kernels = opts.kernels;
    std::unique_ptr<Session> session = Session::load(model.string(), session_opts);
    for (const fs::path& set : sets) {
        std::string prefix = sets.size() > 1 ? set.filename().string() + ": " : "";
        run_data_set(model, set, opts, session, session_opts, prefix);
    }
    return {TestStatus::kPass, "", ""};
}

}  // namespace

TestOutcome run_onnx_test(const std::string& dir, const OnnxTestOptions& opts) {
    try {
        return run_checked(dir, opts);
    } catch (const Verdict& v) {
        return v.outcome;
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::kUnsupported) {
            auto [line, rest] = first_line(e.message());
            return {TestStatus::kUnsupported, line, first_line(e.what()).second};
        }
        auto [line, rest] = first_line(e.what());
        return {TestStatus::kFail, line, rest};
    } catch (const std::exception& e) {
        auto [line, rest] = first_line(e.what());
        return {TestStatus::kFail, line, rest};
    }
}

}  // namespace kiln::cli
