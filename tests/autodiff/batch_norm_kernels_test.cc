// The float32 training-mode BatchNormalization as kernels (runtime/batchnorm_training_kernel.h:
// kiln_bn_train for the forward, kiln_bn_grad for KilnBatchNormGrad, op/defs/batch_norm_grad.cc)
// against the float64 decomposition (batch_norm_gradient_test.cc checks that one against central
// differences): the same float32-representable inputs; Y, the running statistics and the
// gradients of X, scale and B as float64 computes them. Also the op's TE compute (the graph
// interpreter) against the same reference. Shapes: a plane length that is no multiple of the
// kernel's 16 lanes, 2-D and 3-D X, one large enough to split channels over 3 threads; X
// centred far from 0 (the one-pass variance's shift); a ReLU after the BatchNormalization (run
// inside kiln_bn_train, and its mask folded into KilnBatchNormGrad).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gradient_check.h"
#include "runtime/extern_kernel.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::random_tensor;
using kiln::testing::weighted_sum_loss;

struct Result {
    std::vector<Tensor> outs;  // Y (or ReLU(Y)), running mean, running var, dX, dscale, dB
    std::vector<std::string> externs;
    std::vector<std::string> kernels;  // every kernel's description ("BatchNormalization+Relu")
    int grad_nodes = 0, masked = 0;  // KilnBatchNormGrad nodes, those with the ReLU's mask
};

Tensor as_dtype(const Tensor& t, DType dt) {
    Tensor out(dt, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) out.set_f64(i, t.get_f64(i));
    return out;
}

ir::Graph bn_graph(const Shape& xs, DType dt, bool relu, Result& r) {
    ir::Graph g;
    const Shape cs = {xs[1]};
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(dt, xs));
    ir::Value* scale = g.add_input("scale", ir::TensorType::of_static(dt, cs));
    ir::Value* bias = g.add_input("bias", ir::TensorType::of_static(dt, cs));
    ir::Value* mean = g.add_constant("mean", as_dtype(random_tensor(cs, -0.5, 0.5, 31, DType::kFloat32), dt));
    ir::Value* var = g.add_constant("var", as_dtype(random_tensor(cs, 0.5, 1.5, 32, DType::kFloat32), dt));
    ir::Node* bn = pass::add_inferred_node(g, "BatchNormalization", {x, scale, bias, mean, var},
                                           {{"training_mode", int64_t{1}}, {"momentum", 0.8}, {"epsilon", 1e-3}}, 3);
    ir::Value* y = relu ? pass::add_inferred_node(g, "Relu", {bn->output(0)})->output(0) : bn->output(0);
    ir::Value* loss = weighted_sum_loss(g, {y}, 5);
    Gradients grads = differentiate(g, loss, {x, scale, bias});
    std::vector<ir::Value*> outs = {y, bn->output(1), bn->output(2)};
    outs.insert(outs.end(), grads.grads.begin(), grads.grads.end());
    g.set_outputs(outs);
    for (const auto& n : g.nodes()) {
        r.grad_nodes += n->op() == "KilnBatchNormGrad";
        r.masked += n->op() == "KilnBatchNormGrad" && n->num_inputs() == 4;
    }
    return g;
}

std::vector<Tensor> inputs(const Shape& xs, DType dt) {
    const Shape cs = {xs[1]};
    return {as_dtype(random_tensor(xs, 3, 5, 41, DType::kFloat32), dt), as_dtype(random_tensor(cs, 0.5, 1.5, 42, DType::kFloat32), dt),
            as_dtype(random_tensor(cs, -0.5, 0.5, 43, DType::kFloat32), dt)};
}

Result compiled(const Shape& xs, DType dt, bool relu) {
    Result r;
    ir::Graph g = bn_graph(xs, dt, relu, r);
    compiler::CompileOptions opts;
    opts.intra_op_threads = 3;
    compiler::CompiledModel model = compiler::compile(g, opts);
    for (const auto& k : model.kernels) {
        if (!k.extern_name.empty()) r.externs.push_back(k.extern_name);
        r.kernels.push_back(k.description);
    }
    runtime::ThreadPool pool(3);
    auto alloc = runtime::make_session_allocator(0);
    runtime::SequentialExecutor exec(model.executable, &pool, alloc.get());
    Status st = exec.run(inputs(xs, dt), r.outs);
    KILN_CHECK(st.ok(), kInternal) << st.message();
    return r;
}

void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got, const std::string& what, double tol) {
    ASSERT_EQ(want.size(), got.size()) << what;
    const char* names[] = {"Y", "running_mean", "running_var", "dX", "dscale", "dB"};
    for (size_t k = 0; k < want.size(); ++k) {
        double scale = 0;
        for (int64_t i = 0; i < want[k].numel(); ++i) scale = std::max(scale, std::abs(want[k].get_f64(i)));
        int bad = 0;
        for (int64_t i = 0; i < want[k].numel() && bad < 5; ++i) {
            const double w = want[k].get_f64(i), h = got[k].get_f64(i);
            if (std::abs(h - w) > tol * scale + tol * std::abs(w))
                ADD_FAILURE() << what << " " << names[k] << " element " << i << ": " << h << " vs float64 " << w << " (bad "
                              << ++bad << ")";
        }
    }
}

void check(const Shape& xs, bool relu) {
    SCOPED_TRACE("X " + shape_str(xs) + (relu ? " + Relu" : ""));
    const Result ref = compiled(xs, DType::kFloat64, relu);
    ASSERT_EQ(ref.grad_nodes, 0) << "float64 keeps the decomposition";
    const Result got = compiled(xs, DType::kFloat32, relu);
    EXPECT_EQ(got.grad_nodes, 1);
    EXPECT_EQ(got.masked, relu ? 1 : 0) << "the ReLU's mask folded into KilnBatchNormGrad";
    EXPECT_EQ(std::count(got.externs.begin(), got.externs.end(), "kiln_bn_train"), 1);
    EXPECT_EQ(std::count(got.externs.begin(), got.externs.end(), "kiln_bn_grad"), 1);
    // The ReLU runs inside kiln_bn_train (its gradient's mask reads the ReLU's output).
    EXPECT_EQ(std::count(got.kernels.begin(), got.kernels.end(), "Relu"), 0);
    EXPECT_EQ(std::count(got.kernels.begin(), got.kernels.end(), "BatchNormalization+Relu"), relu ? 1 : 0);
    expect_close(ref.outs, got.outs, "kernels", 2e-5);
    // The ops' TE computes, run by the graph interpreter. They sum in float32 in order: the mean's
    // rounding at X's offset of 4 costs dscale about 1e-3 of its size (the kernels' shifted
    // sums, added up in double, keep 2e-5).
    Result unused;
    kiln::testing::InterpretedGraph interp(bn_graph(xs, DType::kFloat32, relu, unused));
    expect_close(ref.outs, interp.run(inputs(xs, DType::kFloat32)), "TE compute", 3e-3);
}

TEST(BatchNormKernels, Planes) { check({4, 8, 9, 10}, false); }
TEST(BatchNormKernels, PlanesWithRelu) { check({4, 8, 9, 10}, true); }
TEST(BatchNormKernels, TwoAndThreeDimensional) {
    check({8, 6}, false);
    check({3, 5, 7}, true);
}
TEST(BatchNormKernels, ChannelsOnThreeThreads) { check({4, 16, 16, 16}, true); }

// A loss curve: Conv -> BatchNormalization (training) -> ReLU -> squared error to a fixed
// target, 20 SGD steps on W, scale and B with the running statistics carried between steps;
// float32 through the kernels against float64 through the decomposition, every step's loss
// within 1e-4 relative.
std::vector<double> loss_curve(DType dt) {
    const Shape xs = {4, 3, 10, 10}, ws = {8, 3, 3, 3}, cs = {8};
    ir::Graph g;
    auto in = [&](const char* name, const Shape& s) { return g.add_input(name, ir::TensorType::of_static(dt, s)); };
    ir::Value *x = in("x", xs), *w = in("w", ws), *scale = in("scale", cs), *bias = in("bias", cs), *mean = in("mean", cs),
              *var = in("var", cs);
    auto node = [&](const char* op, const std::vector<ir::Value*>& ins, ir::AttrMap a = {}, int outs = 1) {
        return pass::add_inferred_node(g, op, ins, a, outs);
    };
    ir::Value* y = node("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})->output(0);
    ir::Node* bn = node("BatchNormalization", {y, scale, bias, mean, var}, {{"training_mode", int64_t{1}}}, 3);
    ir::Value* r = node("Relu", {bn->output(0)})->output(0);
    ir::Value* target = g.add_constant("t", as_dtype(random_tensor({4, 8, 10, 10}, 0, 1, 51, DType::kFloat32), dt));
    ir::Value* d = node("Sub", {r, target})->output(0);
    ir::Value* loss = node("ReduceSum", {node("Mul", {d, d})->output(0)}, {{"keepdims", int64_t{0}}})->output(0);
    Gradients grads = differentiate(g, loss, {w, scale, bias});
    std::vector<ir::Value*> outs = {loss, bn->output(1), bn->output(2)};
    outs.insert(outs.end(), grads.grads.begin(), grads.grads.end());
    g.set_outputs(outs);
    kiln::testing::CompiledGraph step(g);
    std::vector<Tensor> state = {as_dtype(random_tensor(xs, -1, 1, 52, DType::kFloat32), dt),
                                 as_dtype(random_tensor(ws, -0.3, 0.3, 53, DType::kFloat32), dt),
                                 as_dtype(random_tensor(cs, 0.5, 1.5, 54, DType::kFloat32), dt),
                                 as_dtype(random_tensor(cs, -0.5, 0.5, 55, DType::kFloat32), dt),
                                 as_dtype(random_tensor(cs, 0, 0, 56, DType::kFloat32), dt),
                                 as_dtype(random_tensor(cs, 1, 1, 57, DType::kFloat32), dt)};
    std::vector<double> curve;
    for (int s = 0; s < 20; ++s) {
        std::vector<Tensor> o = step.run(state);
        curve.push_back(o[0].get_f64(0));
        state[4] = o[1];
        state[5] = o[2];
        for (size_t p = 0; p < 3; ++p)
            for (int64_t i = 0; i < state[1 + p].numel(); ++i)
                state[1 + p].set_f64(i, state[1 + p].get_f64(i) - 2e-3 * o[3 + p].get_f64(i));
    }
    return curve;
}

TEST(BatchNormKernels, LossCurveMatchesDecomposition) {
    const std::vector<double> want = loss_curve(DType::kFloat64), got = loss_curve(DType::kFloat32);
    EXPECT_LT(want.back(), 0.7 * want.front()) << "the curve falls";
    for (size_t s = 0; s < want.size(); ++s) EXPECT_NEAR(got[s], want[s], 1e-4 * want[s]) << "step " << s;
}

// Forged parameters (an artifact's) are a kiln::Error when the kernel is made, never a crash.
TEST(BatchNormKernels, ForgedParametersAreErrors) {
    runtime::ExternKernelFactory make = runtime::find_extern_kernel("kiln_bn_grad");
    ASSERT_NE(make, nullptr);
    const std::string good = "n=2;c=3;hw=4;epsilon=1e-5;x=0;dy=1;scale=2;dx=3;dscale=4;dbias=5";
    std::vector<runtime::ExternArg> args(6);
    for (int i : {0, 1, 3}) args[i].shape = {2, 3, 2, 2};
    for (int i : {2, 4, 5}) args[i].shape = {3};
    EXPECT_NE(make(runtime::ExternParams(good), args), nullptr);
    std::vector<runtime::ExternArg> wrong = args;
    wrong[3].shape = {2, 3, 2, 3};
    EXPECT_THROW(make(runtime::ExternParams(good), wrong), Error);
    EXPECT_THROW(make(runtime::ExternParams(good + ";r=9"), args), Error);
    EXPECT_THROW(make(runtime::ExternParams("n=2;c=3;hw=5;epsilon=1e-5;x=0;dy=1;scale=2;dx=3;dscale=4;dbias=5"), args), Error);
}

}  // namespace
}  // namespace kiln::autodiff
