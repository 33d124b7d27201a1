// Every op with a gradient entry (OpDef::gradient) has a case here, or the test fails: REVIEW 19
// (gradient tests were hand-picked per file). Each case runs the one-direction check
// (gradient_check.h: check_op_vjp, two forward runs), so shapes are those of real layers; the
// element-wise checks of the other *_gradient_test.cc files stay for the details (kinks,
// broadcasting, each input).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "gradient_check.h"
#include "op/registry.h"

namespace kiln {
namespace {

using testing::check_op_vjp;
using testing::GradCheckOptions;
using testing::random_tensor;

using testing::int64_tensor;
using Ints = std::vector<int64_t>;
using Case = std::function<void()>;

Tensor x(const Shape& s, uint64_t seed, double lo = -2, double hi = 2, DType t = DType::kFloat64) {
    return random_tensor(s, lo, hi, seed, t);
}

// Layer-sized shapes: activations of a small CNN ([2, 16, 14, 14]) and of a transformer block
// ([4, 32, 64]). float64 (generated kernels); f32-only paths are the other files' business.
const Shape kImage = {2, 16, 14, 14}, kTokens = {4, 32, 64};

void unary(const std::string& op, double lo = -2, double hi = 2, ir::AttrMap attrs = {}) {
    check_op_vjp(op, {x(kTokens, 1, lo, hi)}, std::move(attrs));
}
void binary(const std::string& op, double lo = -2, double hi = 2) {  // a row vector broadcast
    check_op_vjp(op, {x(kTokens, 2), x({64}, 3, lo, hi)}, {});
}
void variadic(const std::string& op) { check_op_vjp(op, {x(kTokens, 4), x({64}, 5), x({32, 1}, 6)}, {}); }
void reduce(const std::string& op) { check_op_vjp(op, {x(kTokens, 7), int64_tensor({1, -1}, {2})}, {{"keepdims", int64_t{1}}}); }

std::map<std::string, Case> cases() {
    std::map<std::string, Case> c;
    for (const char* op : {"Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Erf", "Identity"}) c[op] = [op] { unary(op); };
    c["Exp"] = [] { unary("Exp", -2, 1); };
    c["Log"] = [] { unary("Log", 0.5, 3); };
    c["Sqrt"] = [] { unary("Sqrt", 0.5, 3); };
    c["Reciprocal"] = [] { unary("Reciprocal", 0.5, 2); };
    c["LeakyRelu"] = [] { unary("LeakyRelu", -2, 2, {{"alpha", 0.1}}); };
    c["Gelu"] = [] { unary("Gelu", -3, 3, {{"approximate", std::string("tanh")}}); };
    c["Dropout"] = [] { unary("Dropout"); };  // inference: the identity
    c["Clip"] = [] { check_op_vjp("Clip", {x(kTokens, 8), testing::float_tensor({}, {-1.0}), testing::float_tensor({}, {1.2})}, {},
                                  {.wrt = {0}}); };
    for (const char* op : {"Add", "Sub", "Mul"}) c[op] = [op] { binary(op); };
    c["Div"] = [] { binary("Div", 0.5, 2); };
    c["Pow"] = [] { check_op_vjp("Pow", {x(kTokens, 9, 0.5, 2), x({64}, 10, -1.5, 2.5)}, {}); };
    for (const char* op : {"Sum", "Mean", "Max", "Min"}) c[op] = [op] { variadic(op); };
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"}) c[op] = [op] { reduce(op); };
    c["Cast"] = [] { check_op_vjp("Cast", {x(kTokens, 11, -2, 2, DType::kFloat32)}, {{"to", int64_t{11}}}, {.eps = 1e-2}); };
    c["CastLike"] = [] { check_op_vjp("CastLike", {x(kTokens, 12, -2, 2, DType::kFloat32), x({1}, 13)}, {},
                                      {.eps = 1e-2, .wrt = {0}}); };
    c["MatMul"] = [] { check_op_vjp("MatMul", {x(kTokens, 14), x({64, 96}, 15)}, {}); };
    c["Gemm"] = [] { check_op_vjp("Gemm", {x({64, 128}, 16), x({96, 128}, 17), x({96}, 18)},
                                  {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}}); };
    c["Conv"] = [] { check_op_vjp("Conv", {x(kImage, 19), x({32, 16, 3, 3}, 20, -0.3, 0.3), x({32}, 21)},
                                  {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, {.eps = 1e-3}); };
    c["MaxPool"] = [] { check_op_vjp("MaxPool", {x(kImage, 22)},
                                     {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}); };
    c["AveragePool"] = [] { check_op_vjp("AveragePool", {x(kImage, 23)},
                                         {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}); };
    c["GlobalAveragePool"] = [] { check_op_vjp("GlobalAveragePool", {x(kImage, 24)}, {}); };
    c["GlobalMaxPool"] = [] { check_op_vjp("GlobalMaxPool", {x(kImage, 25)}, {}); };
    c["BatchNormalization"] = [] {
        check_op_vjp("BatchNormalization",
                     {x(kImage, 26), x({16}, 27, 0.5, 1.5), x({16}, 28, -1, 1), x({16}, 29, -0.5, 0.5), x({16}, 30, 0.5, 1.5)},
                     {{"training_mode", int64_t{1}}, {"epsilon", 1e-5}}, {.constant_inputs = {3, 4}});
    };
    c["LayerNormalization"] = [] { check_op_vjp("LayerNormalization", {x(kTokens, 31), x({64}, 32, 0.5, 1.5), x({64}, 33)},
                                                {{"axis", int64_t{-1}}, {"epsilon", 1e-5}}); };
    c["Softmax"] = [] { check_op_vjp("Softmax", {x(kTokens, 34)}, {{"axis", int64_t{-1}}}); };
    c["LogSoftmax"] = [] { check_op_vjp("LogSoftmax", {x(kTokens, 35)}, {{"axis", int64_t{-1}}}); };
    c["SoftmaxCrossEntropyLoss"] = [] {
        check_op_vjp("SoftmaxCrossEntropyLoss", {x({32, 10}, 36), testing::random_int64_tensor({32}, 0, 9, 37)}, {});
    };
    c["NegativeLogLikelihoodLoss"] = [] {
        check_op_vjp("NegativeLogLikelihoodLoss", {x({32, 10}, 38), testing::random_int64_tensor({32}, 0, 9, 39)}, {});
    };
    c["Reshape"] = [] { check_op_vjp("Reshape", {x(kTokens, 40), int64_tensor({4, 32, 8, 8}, {4})}, {}); };
    c["Flatten"] = [] { check_op_vjp("Flatten", {x(kImage, 41)}, {{"axis", int64_t{1}}}); };
    c["Squeeze"] = [] { check_op_vjp("Squeeze", {x({4, 1, 32, 64}, 42), int64_tensor({1}, {1})}, {}); };
    c["Unsqueeze"] = [] { check_op_vjp("Unsqueeze", {x(kTokens, 43), int64_tensor({1}, {1})}, {}); };
    c["Transpose"] = [] { check_op_vjp("Transpose", {x(kTokens, 44)}, {{"perm", Ints{0, 2, 1}}}); };
    c["Expand"] = [] { check_op_vjp("Expand", {x({32, 1}, 45), int64_tensor({4, 32, 64}, {3})}, {}); };
    c["Concat"] = [] { check_op_vjp("Concat", {x({4, 8, 64}, 46), x({4, 16, 64}, 47), x({4, 8, 64}, 48)}, {{"axis", int64_t{1}}}); };
    c["Split"] = [] { check_op_vjp("Split", {x(kTokens, 49), int64_tensor({8, 16, 8}, {3})}, {{"axis", int64_t{1}}},
                                   {.num_outputs = 3}); };
    c["Slice"] = [] { check_op_vjp("Slice", {x(kTokens, 50), int64_tensor({1, 2}, {2}), int64_tensor({30, 60}, {2}),
                                             int64_tensor({1, 2}, {2}), int64_tensor({2, 3}, {2})}, {}); };
    c["Gather"] = [] { check_op_vjp("Gather", {x({100, 64}, 51), testing::random_int64_tensor({4, 32}, 0, 99, 52)},
                                    {{"axis", int64_t{0}}}); };  // an embedding lookup: repeated rows accumulate
    return c;
}

// Checked elsewhere, with the reason it cannot run here.
const std::map<std::string, std::string> kElsewhere = {
    {"AllReduce", "a collective: its gradient (the allreduce of the incoming gradient) runs across ranks in "
                  "tests/training/test_sync_batch_norm.py and tests/distributed/data_parallel_test.cc"},
};

TEST(GradientRegistry, EveryOpWithAGradientHasACase) {
    const std::map<std::string, Case> all = cases();
    std::string missing;
    for (const op::OpDef* d : op::OpRegistry::global().all())
        if (d->gradient && !all.count(d->name) && !kElsewhere.count(d->name)) missing += " " + d->name;
    EXPECT_TRUE(missing.empty()) << "ops with a gradient entry and no case in gradient_registry_test.cc:" << missing;
    for (const auto& [name, c] : all) {  // no stale case: each names an op with a gradient
        const op::OpDef* d = op::OpRegistry::global().find(name);
        EXPECT_TRUE(d && d->gradient) << name << " has a case but no gradient entry";
    }
}

class OpVjp : public ::testing::TestWithParam<std::string> {};

TEST_P(OpVjp, MatchesTheCentralDifferenceAlongARandomDirection) { cases().at(GetParam())(); }

std::vector<std::string> case_names() {
    std::vector<std::string> names;
    for (const auto& [name, c] : cases()) names.push_back(name);
    return names;
}

INSTANTIATE_TEST_SUITE_P(GradientRegistry, OpVjp, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace kiln
