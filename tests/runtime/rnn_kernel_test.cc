// The fused recurrent kernel's factory (runtime/rnn_kernel.h) checks what an artifact's step table
// says against the step's argument types: a forged or stale table is a clear kInvalidModel error,
// never an out-of-bounds read. (Its numerics are tested against ONNX Runtime in
// tests/models/test_recurrent_vs_ort.py.)
#include <gtest/gtest.h>

#include "runtime/extern_kernel.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

// A forward LSTM, T=3, batch 2, input 4, hidden 5: X W R (inputs 0-2), Y Y_h (outputs 3-4).
const char* kParams = "cell=lstm;dirs=1;reverse=0;hidden=5;input=4;seq=3;batch=2;layout=0;"
                      "acts=Sigmoid:0:0,Tanh:0:0,Tanh:0:0;x=0;w=1;r=2;y=3;yh=4";

std::vector<ExternArg> lstm_args() {
    return {{DType::kFloat32, {3, 2, 4}}, {DType::kFloat32, {1, 20, 4}}, {DType::kFloat32, {1, 20, 5}},
            {DType::kFloat32, {3, 1, 2, 5}}, {DType::kFloat32, {1, 2, 5}}};
}

std::string factory_error(const std::string& params, const std::vector<ExternArg>& args) {
    ExternKernelFactory f = find_extern_kernel("kiln_rnn");
    if (!f) return "no factory";
    try {
        f(ExternParams(params), args);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel) << e.what();
        return e.what();
    }
    return "";
}

TEST(RnnKernel, AcceptsMatchingArgumentsAndViews) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    EXPECT_EQ(factory_error(kParams, lstm_args()), "");
    std::vector<ExternArg> args = lstm_args();
    args[0].shape = {3, 1, 2, 4};  // X is a view's buffer (an Unsqueeze's input): same elements
    EXPECT_EQ(factory_error(kParams, args), "");
}

TEST(RnnKernel, RejectsAForgedShape) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    std::vector<ExternArg> args = lstm_args();
    args[2].shape = {1, 20, 6};  // R of another hidden size
    std::string msg = factory_error(kParams, args);
    EXPECT_NE(msg.find("argument r must be f32[1,20,5], got f32[1,20,6]"), std::string::npos) << msg;
    args = lstm_args();
    args[0].dtype = DType::kFloat64;
    msg = factory_error(kParams, args);
    EXPECT_NE(msg.find("argument x must be f32[3,2,4], got f64[3,2,4]"), std::string::npos) << msg;
}

TEST(RnnKernel, RejectsAnArgumentIndexOutOfRange) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    const std::string msg = factory_error(std::string(kParams) + ";h0=9", lstm_args());
    EXPECT_NE(msg.find("h0=9 out of range"), std::string::npos) << msg;
}

TEST(RnnKernel, RejectsAnUnknownActivation) {
    if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    std::string p = kParams;
    p.replace(p.find("Sigmoid"), 7, "Swish");
    EXPECT_NE(factory_error(p, lstm_args()).find("Swish"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
