// The float32 Conv gradient as kernels (op/defs/conv_grad.cc: KilnConvGradData /
// KilnConvGradWeight, run by oneDNN's backward primitives, runtime/dnnl_conv_backward.h, or by
// their generated TE compute) against the float64 decomposition (conv_gradient_test.cc checks
// that one against central differences): the same float32-representable inputs, the float64
// gradients of the same loss as the reference. Tolerance: 1e-5 of the largest reference
// gradient element plus 1e-5 relative (float32 sums of at most a few hundred unit products).
// Shapes cover strides, asymmetric pads, groups (depthwise), dilations, 1x1, a 7x7 stem, 1-D
// and 3-D, each run on 3 threads (oneDNN's parts: uneven image splits, the weight gradient's
// partial sums added).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "../scoped_env.h"
#include "gradient_check.h"
#include "runtime/extern_kernel.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::random_tensor;
using kiln::testing::weighted_sum_loss;
using Ints = std::vector<int64_t>;

struct Case {
    Shape x, w;
    ir::AttrMap attrs;
};

struct Result {
    std::vector<Tensor> grads;        // dX, dW
    std::vector<std::string> externs;  // the extern kernels the compile chose
    int grad_ops = 0;                  // KilnConvGrad* nodes in the gradient graph
};

Tensor as_dtype(const Tensor& t, DType dt) {
    Tensor out(dt, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) out.set_f64(i, t.get_f64(i));
    return out;
}

Result conv_grads(const Case& c, DType dt, compiler::KernelSource source, int threads) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(dt, c.x));
    ir::Value* w = g.add_input("w", ir::TensorType::of_static(dt, c.w));
    ir::Value* y = pass::add_inferred_node(g, "Conv", {x, w}, c.attrs)->output(0);
    ir::Value* loss = weighted_sum_loss(g, {y}, 3);
    Gradients grads = differentiate(g, loss, g.inputs());
    g.set_outputs(grads.grads);
    Result r;
    for (const auto& n : g.nodes()) r.grad_ops += n->op().rfind("KilnConvGrad", 0) == 0;
    compiler::CompileOptions opts;
    opts.kernels = source;
    opts.intra_op_threads = threads;
    compiler::CompiledModel model = compiler::compile(g, opts);
    for (const auto& k : model.kernels)
        if (!k.extern_name.empty()) r.externs.push_back(k.extern_name);
    runtime::ThreadPool pool(threads);
    auto alloc = runtime::make_session_allocator(0);
    runtime::SequentialExecutor exec(model.executable, &pool, alloc.get());
    const Tensor x32 = random_tensor(c.x, -1, 1, 11, DType::kFloat32), w32 = random_tensor(c.w, -1, 1, 12, DType::kFloat32);
    Status st = exec.run({as_dtype(x32, dt), as_dtype(w32, dt)}, r.grads);
    KILN_CHECK(st.ok(), kInternal) << st.message();
    return r;
}

void check(const Case& c) {
    std::string what = "X " + shape_str(c.x) + " W " + shape_str(c.w);
    for (const auto& [k, v] : c.attrs) what += " " + k + "=" + ir::attr_str(v);
    SCOPED_TRACE(what);
    const Result ref = conv_grads(c, DType::kFloat64, compiler::KernelSource::kGenerated, 1);
    ASSERT_EQ(ref.grad_ops, 0) << "float64 keeps the decomposition";
    for (auto source : {compiler::KernelSource::kAuto, compiler::KernelSource::kGenerated}) {
        const bool dnnl = source == compiler::KernelSource::kAuto && runtime::have_dnnl();
        const Result got = conv_grads(c, DType::kFloat32, source, 3);
        EXPECT_EQ(got.grad_ops, runtime::have_dnnl() ? 2 : 0) << "the kernels' ops only where oneDNN runs them";
        const int bwd = static_cast<int>(std::count(got.externs.begin(), got.externs.end(), "dnnl_conv_bwd"));
        EXPECT_EQ(bwd, dnnl ? 2 : 0) << "oneDNN's backward kernels";
        ASSERT_EQ(got.grads.size(), 2u);
        for (size_t k = 0; k < 2; ++k) {
            const Tensor& r = ref.grads[k];
            double scale = 0;
            for (int64_t i = 0; i < r.numel(); ++i) scale = std::max(scale, std::abs(r.get_f64(i)));
            int bad = 0;
            for (int64_t i = 0; i < r.numel() && bad < 5; ++i) {
                const double want = r.get_f64(i), have = got.grads[k].get_f64(i);
                if (std::abs(have - want) > 1e-5 * scale + 1e-5 * std::abs(want))
                    ADD_FAILURE() << (dnnl ? "oneDNN" : "generated") << (k ? " dW" : " dX") << " element " << i << ": "
                                  << have << " vs float64 " << want << " (bad " << ++bad << ")";
            }
        }
    }
}

TEST(ConvGradientKernels, Padded3x3) { check({{4, 8, 9, 10}, {16, 8, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}}); }

TEST(ConvGradientKernels, StridedAsymmetricPads) {
    check({{3, 5, 11, 9}, {7, 5, 3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 2, 1}}}});
}

TEST(ConvGradientKernels, Stem7x7) {
    check({{2, 3, 22, 22}, {16, 3, 7, 7}, {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}});
}

TEST(ConvGradientKernels, Strided1x1) { check({{4, 16, 8, 8}, {32, 16, 1, 1}, {{"strides", Ints{2, 2}}}}); }

TEST(ConvGradientKernels, GroupedDilated) {
    check({{2, 8, 9, 9}, {12, 4, 3, 3}, {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}, {"pads", Ints{2, 1, 2, 1}}}});
}

TEST(ConvGradientKernels, Depthwise) {
    check({{3, 16, 8, 8}, {16, 1, 3, 3}, {{"group", int64_t{16}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGradientKernels, OneAndThreeDimensional) {
    check({{2, 4, 17}, {6, 4, 5}, {{"strides", Ints{3}}, {"dilations", Ints{2}}, {"pads", Ints{2, 3}}}});
    check({{2, 3, 5, 6, 4}, {4, 3, 3, 2, 3}, {{"strides", Ints{1, 2, 1}}, {"pads", Ints{1, 0, 1, 1, 1, 1}}}});
}

// Strides that leave the last input rows unread (oneDNN's right pad would be negative: the
// kernel crops X and zeroes dX's unread rows), as ResNet's 1x1 stride-2 convs do.
TEST(ConvGradientKernels, TrailingRowsUnread) {
    check({{2, 2, 6, 7}, {2, 2, 3, 3}, {{"strides", Ints{2, 3}}}});
}

// The weight gradient as im2col + sgemm (runtime/conv_weight_gemm.h), which the kernel picks
// for small planes of large layers only, forced on shapes of the cases above.
TEST(ConvGradientKernels, WeightGradientAsGemm) {
    ::setenv("KILN_CONV_WGRAD", "gemm", 1);
    check({{4, 8, 9, 10}, {16, 8, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}});
    check({{3, 5, 11, 9}, {7, 5, 3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 2, 1}}}});
    check({{2, 3, 22, 22}, {16, 3, 7, 7}, {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}});
    check({{4, 16, 8, 8}, {32, 16, 1, 1}, {{"strides", Ints{2, 2}}}});
    check({{2, 8, 9, 9}, {12, 8, 3, 3}, {{"dilations", Ints{2, 1}}, {"pads", Ints{2, 1, 2, 1}}}});
    check({{2, 2, 6, 7}, {2, 2, 3, 3}, {{"strides", Ints{2, 3}}}});
    ::unsetenv("KILN_CONV_WGRAD");
}

// oneDNN's Winograd kernels (jit_wino_4x3), which the kernel picks for 3x3 stride-1 layers of
// 32+ channels on planes of 14x14 and up (runtime/conv_backward_choice.h; ResNet-18's layer1
// and layer2), within the same tolerance; then every forced algorithm and activation layout
// (KILN_CONV_BWD_ALGO / KILN_CONV_BWD_LAYOUT) on a padded, a strided and a cropped shape.
TEST(ConvGradientKernels, WinogradLayer) { check({{2, 32, 14, 14}, {32, 32, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}}); }

TEST(ConvGradientKernels, ForcedAlgorithmsAndLayouts) {
    for (const char* algo : {"winograd", "direct"})
        for (const char* layout : {"any", "nhwc", "nchw", "nChw16c"}) {
            SCOPED_TRACE(std::string(algo) + " on " + layout);
            kiln::testing::ScopedEnv a("KILN_CONV_BWD_ALGO", algo), l("KILN_CONV_BWD_LAYOUT", layout);
            check({{2, 16, 9, 10}, {16, 16, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}});
            check({{3, 5, 11, 9}, {7, 5, 3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 2, 1}}}});
            check({{2, 4, 6, 7}, {8, 4, 1, 1}, {{"strides", Ints{2, 3}}}});
        }
}

// A training step's forward Conv reads its weights as a run-time input: oneDNN's kernel asks
// nChw16c for plain activations of whole 16-channel blocks (dnnl_kernels.cc, training_blocked;
// KILN_CONV_FWD_LAYOUT=any restores oneDNN's own pick) and reorders at the edges. Y in float32
// (both layouts) against the float64 generated kernel, 1e-5 of the largest element plus 1e-5
// relative: 16 -> 32 channels, 8 -> 16 (plain input, blocked output), the 3-channel stem, a
// strided 3x3, with and without a bias.
void check_forward(const Case& c, bool with_bias) {
    SCOPED_TRACE("X " + shape_str(c.x) + " W " + shape_str(c.w) + (with_bias ? " bias" : ""));
    auto run = [&](DType dt, compiler::KernelSource source, std::vector<std::string>* externs) {
        ir::Graph g;
        std::vector<ir::Value*> ins = {g.add_input("x", ir::TensorType::of_static(dt, c.x)),
                                       g.add_input("w", ir::TensorType::of_static(dt, c.w))};
        if (with_bias) ins.push_back(g.add_input("b", ir::TensorType::of_static(dt, {c.w[0]})));
        g.set_outputs({pass::add_inferred_node(g, "Conv", ins, c.attrs)->output(0)});
        compiler::CompileOptions opts;
        opts.kernels = source;
        opts.intra_op_threads = 3;
        compiler::CompiledModel model = compiler::compile(g, opts);
        for (const auto& k : model.kernels)
            if (externs && !k.extern_name.empty()) externs->push_back(k.extern_name);
        runtime::ThreadPool pool(3);
        auto alloc = runtime::make_session_allocator(0);
        runtime::SequentialExecutor exec(model.executable, &pool, alloc.get());
        std::vector<Tensor> in = {as_dtype(random_tensor(c.x, -1, 1, 31, DType::kFloat32), dt),
                                  as_dtype(random_tensor(c.w, -1, 1, 32, DType::kFloat32), dt)};
        if (with_bias) in.push_back(as_dtype(random_tensor({c.w[0]}, -1, 1, 33, DType::kFloat32), dt));
        std::vector<Tensor> out;
        Status st = exec.run(in, out);
        KILN_CHECK(st.ok(), kInternal) << st.message();
        return out.at(0);
    };
    const Tensor ref = run(DType::kFloat64, compiler::KernelSource::kGenerated, nullptr);
    double scale = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) scale = std::max(scale, std::abs(ref.get_f64(i)));
    for (const char* layout : {"", "any"}) {
        if (*layout) ::setenv("KILN_CONV_FWD_LAYOUT", layout, 1);
        std::vector<std::string> externs;
        const Tensor got = run(DType::kFloat32, compiler::KernelSource::kAuto, &externs);
        ::unsetenv("KILN_CONV_FWD_LAYOUT");
        if (runtime::have_dnnl()) EXPECT_EQ(externs, std::vector<std::string>{"dnnl_conv"});
        int bad = 0;
        for (int64_t i = 0; i < ref.numel() && bad < 5; ++i) {
            const double want = ref.get_f64(i), have = got.get_f64(i);
            if (std::abs(have - want) > 1e-5 * scale + 1e-5 * std::abs(want))
                ADD_FAILURE() << "layout '" << layout << "' Y element " << i << ": " << have << " vs float64 " << want
                              << " (bad " << ++bad << ")";
        }
    }
}

TEST(ConvGradientKernels, ForwardWithRuntimeWeights) {
    check_forward({{4, 16, 9, 10}, {32, 16, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}}, false);
    check_forward({{3, 8, 8, 8}, {16, 8, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}}, true);
    check_forward({{2, 3, 22, 22}, {16, 3, 7, 7}, {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}}, false);
    check_forward({{4, 32, 9, 9}, {16, 32, 3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}}, true);
}

}  // namespace
}  // namespace kiln::autodiff

namespace kiln::autodiff {
namespace {

// KilnMaxPoolGrad two ways: the runtime's scatter (what a compiled graph runs,
// runtime/maxpool_grad_kernel.h) and the op's TE compute (a gather over the windows holding each
// input) run by the graph interpreter; Indices from a compiled MaxPool of random X, so windows
// overlap, pad and (ceil_mode, dilation) reach past the end. Both sum the same one or two
// values per input: equal to 1e-12.
void check_max_pool_grad(const Shape& x_shape, const ir::AttrMap& attrs) {
    ir::Graph fwd;
    ir::Value* x = fwd.add_input("x", ir::TensorType::of_static(DType::kFloat64, x_shape));
    ir::Node* pool = pass::add_inferred_node(fwd, "MaxPool", {x}, attrs, 2);
    fwd.set_outputs({pool->output(0), pool->output(1)});
    const ir::TensorType yt = pool->output(0)->type(), it = pool->output(1)->type();  // before compile() rewrites fwd
    std::vector<Tensor> outs = kiln::testing::run_graph(fwd, {random_tensor(x_shape, -1, 1, 21)});
    const Tensor dy = random_tensor(yt.static_shape(), -1, 1, 22);
    std::vector<int64_t> pads = attrs.count("pads") ? std::get<std::vector<int64_t>>(attrs.at("pads")) : Ints(4, 0);
    auto make = [&](ir::Graph& g) {
        ir::Value* a = g.add_input("dy", yt);
        ir::Value* b = g.add_input("ind", it);
        ir::AttrMap ga = {{"kernel_shape", attrs.at("kernel_shape")}, {"strides", attrs.at("strides")},
                          {"dilations", attrs.count("dilations") ? attrs.at("dilations") : ir::Attr(Ints{1, 1})},
                          {"pads", pads}, {"input_shape", Ints(x_shape.begin() + 2, x_shape.end())}};
        g.set_outputs({pass::add_inferred_node(g, "KilnMaxPoolGrad", {a, b}, ga)->output(0)});
    };
    ir::Graph compiled_g, interp_g;
    make(compiled_g);
    make(interp_g);
    const Tensor scattered = kiln::testing::run_graph(compiled_g, {dy, outs[1]}).at(0);
    const Tensor gathered = kiln::testing::InterpretedGraph(std::move(interp_g)).run({dy, outs[1]}).at(0);
    ASSERT_EQ(scattered.shape(), Shape(x_shape));
    double total = 0;
    for (int64_t i = 0; i < scattered.numel(); ++i) {
        ASSERT_NEAR(scattered.get_f64(i), gathered.get_f64(i), 1e-12) << "element " << i;
        total += std::abs(gathered.get_f64(i));
    }
    EXPECT_GT(total, 0);
}

TEST(MaxPoolGradKernel, ScatterMatchesGather) {
    check_max_pool_grad({2, 3, 7, 6}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
    check_max_pool_grad({1, 2, 8, 9}, {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{3, 2}}, {"dilations", Ints{2, 1}},
                                       {"ceil_mode", int64_t{1}}, {"pads", Ints{0, 0, 0, 0}}});
}

}  // namespace
}  // namespace kiln::autodiff

namespace kiln::autodiff {
namespace {

// Forged parameters (an artifact's, REVIEW.md 8) are a kiln::Error when the kernel is made,
// never a crash; oneDNN's implementation query answers "" for them.
TEST(ConvGradientKernels, ForgedParametersAreErrors) {
    if (!runtime::have_dnnl()) GTEST_SKIP() << "built without oneDNN";
    runtime::ExternKernelFactory make = runtime::find_extern_kernel("dnnl_conv_bwd");
    ASSERT_NE(make, nullptr);
    const std::string good =
        "kind=data;src=2,3,8,8;wei=4,3,3,3;dst=2,4,8,8;groups=1;strides=1,1;dilates=0,0;pad_l=1,1;pad_r=1,1;"
        "crop=8,8;dy_arg=0;w_arg=1;out_arg=2";
    std::vector<runtime::ExternArg> args(3);
    args[0].shape = {2, 4, 8, 8};
    args[1].shape = {4, 3, 3, 3};
    args[2].shape = {2, 3, 8, 8};
    EXPECT_NE(make(runtime::ExternParams(good), args), nullptr);
    EXPECT_NE(runtime::dnnl_implementation("dnnl_conv_bwd", good), "");
    std::vector<runtime::ExternArg> wrong = args;
    wrong[2].shape = {2, 3, 8, 9};
    EXPECT_THROW(make(runtime::ExternParams(good), wrong), Error);
    const std::string bad_arg = good.substr(0, good.rfind("out_arg=")) + "out_arg=7";
    EXPECT_THROW(make(runtime::ExternParams(bad_arg), args), Error);
    const std::string bad_crop = "kind=data;src=2,3,8,8;wei=4,3,3,3;dst=2,4,8,8;groups=1;strides=1,1;dilates=0,0;"
                                 "pad_l=1,1;pad_r=1,1;crop=9,8;dy_arg=0;w_arg=1;out_arg=2";
    EXPECT_THROW(make(runtime::ExternParams(bad_crop), args), Error);
    EXPECT_EQ(runtime::dnnl_implementation("dnnl_conv_bwd", bad_crop), "");
}

}  // namespace
}  // namespace kiln::autodiff
