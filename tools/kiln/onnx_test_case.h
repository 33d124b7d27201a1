// One ONNX backend node test: a directory with model.onnx and test_data_set_*/ holding
// input_<i>.pb and output_<i>.pb (serialized TensorProtos). Input i feeds model input i in
// Session::inputs() order; output i is compared with model output i.
#pragma once

#include <string>

#include "output_compare.h"

namespace kiln::cli {

enum class TestStatus { kPass, kFail, kUnsupported };

/// "PASS", "FAIL", "UNSUPPORTED".
const char* test_status_name(TestStatus s);

struct TestOutcome {
    TestStatus status = TestStatus::kPass;
    std::string reason;   // one line; empty for PASS
    std::string details;  // further lines (error context), shown with --verbose
};

struct OnnxTestOptions {
    int threads = 1;
    int opt_level = 3;  // graph optimization level of the session
    std::string kernels = "auto";  // SessionOptions::kernels
    Tolerance tolerance;
};

/// Runs the test in `dir` in this process. Never throws: a kiln::Error of kind kUnsupported (from
/// loading or running) is UNSUPPORTED, any other error or mismatch is FAIL; a data file that is not
/// a plain tensor (sequence, optional or map) is UNSUPPORTED.
TestOutcome run_onnx_test(const std::string& dir, const OnnxTestOptions& opts);

}  // namespace kiln::cli
