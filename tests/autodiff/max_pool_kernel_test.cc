// MaxPool with Indices as the runtime's one-pass kernel (runtime/maxpool_kernel.h, "kiln_maxpool")
// against a direct loop over each window written here from ONNX's definition (the window's
// in-bounds positions in row-major order; the first strict maximum is the value and its flat
// index, as ONNX's reference and PyTorch pick among ties). X holds few distinct values, so most
// windows tie (float32 rows of at least 16 outputs: narrower ones stay generated). Shapes: ResNet's 3x3 stride-2 pad-1 stem pool (float32 and float64, enough
// planes to run in parallel on 3 threads), asymmetric pads with dilation and ceil_mode, 1-D and
// 3-D windows, the Indices alone (MaxPool's gradient reads only them), a window holding a NaN
// and planes of -inf, both vector widths of the float32 scan. And the training graph: one MaxPool, with its Indices, feeds both the
// forward and KilnMaxPoolGrad (no second MaxPool for the Indices).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "autodiff/training_graph.h"
#include "gradient_check.h"
#include "runtime/extern_kernel.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::random_tensor;
using Ints = std::vector<int64_t>;

struct Pool {
    Shape x;
    Ints kernel, strides, dilations, pads;  // pads: begins, then ends
    bool ceil = false;

    int sp() const { return static_cast<int>(kernel.size()); }
    // ONNX's output size; with ceil_mode a window starting past the input and begin pad is dropped.
    int64_t out(int d) const {
        const int64_t in = x[2 + d], span = (kernel[d] - 1) * dilations[d] + 1;
        const int64_t room = in + pads[d] + pads[sp() + d] - span;
        int64_t o = (ceil ? (room + strides[d] - 1) / strides[d] : room / strides[d]) + 1;
        if (ceil && (o - 1) * strides[d] >= in + pads[d]) --o;
        return o;
    }
    Shape y() const {
        Shape s = {x[0], x[1]};
        for (int d = 0; d < sp(); ++d) s.push_back(out(d));
        return s;
    }
    ir::AttrMap attrs() const {
        return {{"kernel_shape", kernel}, {"strides", strides}, {"dilations", dilations}, {"pads", pads},
                {"ceil_mode", int64_t{ceil ? 1 : 0}}};
    }
};

// The reference: values and flat indices, window by window.
std::pair<std::vector<double>, std::vector<int64_t>> reference(const Pool& p, const Tensor& x) {
    const Shape ys = p.y();
    const int sp = p.sp();
    int64_t in_plane = 1, out_plane = 1;
    for (int d = 0; d < sp; ++d) in_plane *= p.x[2 + d], out_plane *= ys[2 + d];
    std::vector<double> val;
    std::vector<int64_t> ind;
    for (int64_t plane = 0; plane < p.x[0] * p.x[1]; ++plane)
        for (int64_t o = 0; o < out_plane; ++o) {
            Ints oc(sp);  // output coordinates
            int64_t r = o;
            for (int d = sp - 1; d >= 0; --d) oc[d] = r % ys[2 + d], r /= ys[2 + d];
            int64_t windows = 1;
            for (int64_t k : p.kernel) windows *= k;
            double best = 0;
            int64_t at = -1;
            for (int64_t w = 0; w < windows; ++w) {  // kernel offsets, row-major
                int64_t flat = 0, rest = w, stride = windows;
                bool inside = true;
                for (int d = 0; d < sp; ++d) {
                    stride /= p.kernel[d];
                    const int64_t k = rest / stride;
                    rest %= stride;
                    const int64_t i = oc[d] * p.strides[d] - p.pads[d] + k * p.dilations[d];
                    inside = inside && i >= 0 && i < p.x[2 + d];
                    flat = flat * p.x[2 + d] + i;
                }
                if (!inside) continue;
                const double v = x.get_f64(plane * in_plane + flat);
                if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, at = plane * in_plane + flat;
            }
            val.push_back(best);
            ind.push_back(at);
        }
    return {val, ind};
}

// X with values in {0, 1, 2}: ties in most windows.
Tensor tied(const Shape& s, DType dt, uint64_t seed) {
    Tensor x = random_tensor(s, 0, 3, seed, dt);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::floor(x.get_f64(i)));
    return x;
}

struct Run {
    std::vector<Tensor> outs;
    int kernels = 0;  // steps run by kiln_maxpool
};

// MaxPool(X) -> (Y, Indices), or the Indices alone, compiled and run on 3 threads.
Run run_pool(const Pool& p, const Tensor& x, bool values_too) {
    ir::Graph g;
    ir::Value* xv = g.add_input("x", ir::TensorType::of_static(x.dtype(), p.x));
    ir::Node* pool = pass::add_inferred_node(g, "MaxPool", {xv}, p.attrs(), 2);
    if (values_too) g.set_outputs({pool->output(0), pool->output(1)});
    else g.set_outputs({pool->output(1)});
    compiler::CompileOptions opts;
    opts.intra_op_threads = 3;
    Run r;
    kiln::testing::CompiledGraph c(g, opts);
    for (const auto& k : c.model().kernels) r.kernels += k.extern_name == "kiln_maxpool";
    r.outs = c.run({x});
    return r;
}

void check(const Pool& p, DType dt, const Tensor& x, int kernels = 1) {
    SCOPED_TRACE("X " + shape_str(p.x) + " " + dtype_name(dt));
    const auto [val, ind] = reference(p, x);
    for (bool values_too : {true, false}) {
        const Run r = run_pool(p, x, values_too);
        EXPECT_EQ(r.kernels, kernels) << "steps run by kiln_maxpool";
        const Tensor& got_ind = r.outs.back();
        ASSERT_EQ(got_ind.shape(), p.y());
        ASSERT_EQ(got_ind.numel(), static_cast<int64_t>(ind.size()));
        for (int64_t i = 0; i < got_ind.numel(); ++i) ASSERT_EQ(got_ind.get_i64(i), ind[i]) << "Indices element " << i;
        if (!values_too) continue;
        for (int64_t i = 0; i < r.outs[0].numel(); ++i) {
            const double v = r.outs[0].get_f64(i);
            if (std::isnan(val[i])) EXPECT_TRUE(std::isnan(v)) << "Y element " << i;
            else ASSERT_EQ(v, val[i]) << "Y element " << i;
        }
    }
}

TEST(MaxPoolKernel, ResNetStemWithTies) {
    const Pool p{{4, 16, 14, 37}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}};  // 64 planes x 518: parallel
    check(p, DType::kFloat32, tied(p.x, DType::kFloat32, 1));
    check(p, DType::kFloat64, tied(p.x, DType::kFloat64, 2));
}

TEST(MaxPoolKernel, EveryElementEqual) {  // each index is the window's first in-bounds element
    const Pool p{{1, 2, 7, 34}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}};
    Tensor x(DType::kFloat32, p.x);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, 0.5);
    check(p, DType::kFloat32, x);
}

TEST(MaxPoolKernel, AsymmetricPadsDilationCeilMode) {
    const Pool p{{2, 3, 9, 40}, {2, 3}, {3, 2}, {2, 1}, {1, 0, 0, 2}, true};
    check(p, DType::kFloat32, tied(p.x, DType::kFloat32, 3));
    check(p, DType::kFloat32, random_tensor(p.x, -1, 1, 4));
}

TEST(MaxPoolKernel, OneAndThreeDimensional) {
    const Pool one{{2, 3, 17}, {3}, {2}, {2}, {2, 1}};
    check(one, DType::kFloat64, tied(one.x, DType::kFloat64, 5));
    const Pool three{{1, 2, 5, 6, 34}, {2, 3, 2}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1, 1, 1, 0}};
    check(three, DType::kFloat32, tied(three.x, DType::kFloat32, 6));
}

TEST(MaxPoolKernel, NaNAndMinusInfinity) {
    const Pool p{{1, 2, 6, 34}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}};
    Tensor x = tied(p.x, DType::kFloat32, 7);
    for (int64_t i = 204; i < 408; ++i) x.set_f64(i, -std::numeric_limits<double>::infinity());  // plane 1
    x.set_f64(7, std::nan(""));  // inside four windows
    x.set_f64(14, std::nan(""));
    check(p, DType::kFloat32, x);
}

// float32 output rows narrower than 16 stay on the generated pool (faster there); float64 (the
// gradient tests' dtype) takes the kernel at any width.
TEST(MaxPoolKernel, NarrowFloat32RowsStayGenerated) {
    const Pool p{{2, 4, 8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}};
    check(p, DType::kFloat32, tied(p.x, DType::kFloat32, 10), 0);
    check(p, DType::kFloat64, tied(p.x, DType::kFloat64, 11), 1);
}

// The training step: MaxPool gets its Indices output (build_training_graph), and its gradient
// reads them; no second MaxPool computes them.
TEST(MaxPoolKernel, TrainingGraphHasOneMaxPool) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {2, 3, 8, 8}));
    ir::Value* w = g.add_constant("w", random_tensor({4, 3, 3, 3}, -1, 1, 8, DType::kFloat32));
    ir::Value* c = pass::add_inferred_node(g, "Conv", {x, w}, {{"pads", Ints{1, 1, 1, 1}}})->output(0);
    ir::Value* y = pass::add_inferred_node(g, "MaxPool", {c}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}})
                       ->output(0);
    g.set_outputs({y});
    ModelState state = find_model_state(g, {"w"}, {});
    TrainingGraph t = build_training_graph(std::move(g), state, {.kind = "mse"}, {}, TrainingGraphKind::kTrainStep);
    int pools = 0, grads = 0;
    for (const ir::Node* n : t.graph.nodes()) {
        if (n->op() == "MaxPool") {
            ++pools;
            EXPECT_EQ(n->num_outputs(), 2u);
            ASSERT_FALSE(n->output(1)->users().empty());
            EXPECT_EQ(n->output(1)->users()[0]->op(), "KilnMaxPoolGrad");
        }
        grads += n->op() == "KilnMaxPoolGrad";
    }
    EXPECT_EQ(pools, 1);
    EXPECT_EQ(grads, 1);
}

// Both vector widths of the float32 scan (SSE2's 8 outputs a step and, where the CPU has AVX2,
// 16; a compiled graph gets the widest), the kernel made and run directly: rows of 27 inner
// outputs (a full step and an overlapping last one) and 5 (shorter than a step: one by one).
TEST(MaxPoolKernel, BothVectorWidths) {
    for (const Pool& p : {Pool{{2, 3, 56, 56}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
                          Pool{{1, 2, 9, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
                          Pool{{1, 2, 12, 40}, {2, 2}, {1, 1}, {1, 2}, {0, 1, 1, 0}}}) {
        SCOPED_TRACE("X " + shape_str(p.x));
        const Tensor x = tied(p.x, DType::kFloat32, 9);
        const auto [val, ind] = reference(p, x);
        runtime::ExternKernelFactory make = runtime::find_extern_kernel("kiln_maxpool");
        ASSERT_NE(make, nullptr);
        std::vector<runtime::ExternArg> args(3);
        args[0].shape = p.x;
        args[1].shape = args[2].shape = p.y();
        args[2].dtype = DType::kInt64;
        auto join = [](const Ints& v) {
            std::string s;
            for (int64_t e : v) s += (s.empty() ? "" : ",") + std::to_string(e);
            return s;
        };
        Ints out;
        for (int d = 0; d < p.sp(); ++d) out.push_back(p.out(d));
        const std::string params = "x=0;y=1;indices=2;planes=" + std::to_string(p.x[0] * p.x[1]) +
                                   ";in=" + join(Ints(p.x.begin() + 2, p.x.end())) + ";out=" + join(out) +
                                   ";kernel=" + join(p.kernel) + ";strides=" + join(p.strides) +
                                   ";dilations=" + join(p.dilations) + ";pads=" + join(Ints(p.pads.begin(), p.pads.begin() + p.sp()));
        for (const char* step : {"8", "16"}) {
            SCOPED_TRACE(std::string("step ") + step);
            std::unique_ptr<runtime::ExternKernel> k;
            try {
                k = make(runtime::ExternParams(params + ";step=" + step), args);
            } catch (const Error&) {
                ASSERT_EQ(std::string(step), "16") << "step 8 is always made";
                continue;  // no AVX2 here
            }
            Tensor y(DType::kFloat32, p.y()), got(DType::kInt64, p.y());
            void* ptrs[3] = {const_cast<void*>(x.data()), y.data(), got.data()};
            kiln_kernel_env env{};
            ASSERT_TRUE(k->run(ptrs, env, 1).ok());
            for (int64_t i = 0; i < got.numel(); ++i) {
                ASSERT_EQ(got.get_i64(i), ind[i]) << "Indices element " << i;
                ASSERT_EQ(y.get_f64(i), val[i]) << "Y element " << i;
            }
        }
    }
}

// Forged parameters (an artifact's) are a kiln::Error when the kernel is made, never a crash.
TEST(MaxPoolKernel, ForgedParametersAreErrors) {
    runtime::ExternKernelFactory make = runtime::find_extern_kernel("kiln_maxpool");
    ASSERT_NE(make, nullptr);
    std::vector<runtime::ExternArg> args(3);
    args[0].shape = {1, 2, 6, 6};
    args[1].shape = args[2].shape = {1, 2, 3, 3};
    args[2].dtype = DType::kInt64;
    const std::string good = "x=0;y=1;indices=2;planes=2;in=6,6;out=3,3;kernel=3,3;strides=2,2;dilations=1,1;pads=1,1";
    EXPECT_NE(make(runtime::ExternParams(good), args), nullptr);
    EXPECT_THROW(make(runtime::ExternParams("x=0;y=1;indices=2;planes=2;in=6,6;out=4,3;kernel=3,3;strides=2,2;"
                                            "dilations=1,1;pads=1,1"),
                      args),
                 Error);
    EXPECT_THROW(make(runtime::ExternParams("x=0;y=1;indices=5;planes=2;in=6,6;out=3,3;kernel=3,3;strides=2,2;"
                                            "dilations=1,1;pads=1,1"),
                      args),
                 Error);
    EXPECT_THROW(make(runtime::ExternParams("x=0;y=1;indices=2;planes=2;in=6,6;out=3,3;kernel=3;strides=2,2;"
                                            "dilations=1,1;pads=1,1"),
                      args),
                 Error);
    EXPECT_THROW(make(runtime::ExternParams("x=0;y=1;indices=2;planes=2;in=6,6;out=3,3;kernel=3,3;strides=0,2;"
                                            "dilations=1,1;pads=1,1"),
                      args),
                 Error);
    std::vector<runtime::ExternArg> wrong = args;
    wrong[2].dtype = DType::kInt32;
    EXPECT_THROW(make(runtime::ExternParams(good), wrong), Error);
}

}  // namespace
}  // namespace kiln::autodiff
