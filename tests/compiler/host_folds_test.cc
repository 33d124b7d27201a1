// Host folds (compiler/host_folds.h) against loops written here: a transpose of every rank-3
// permutation (f32 and i64), a concat along the middle axis, f32 arithmetic with numpy
// broadcasting, and the ops they leave to a kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "compiler/host_folds.h"

using namespace kiln;

namespace {

Tensor iota(DType dt, Shape shape, int64_t start = 0) {
    Tensor t(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(start + i) * 0.5 - 3);
    return t;
}

ir::Value* constant(ir::Graph& g, const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }

Tensor run(const ir::Node& n, DType dt, Shape shape) {
    Tensor out(dt, shape);
    EXPECT_TRUE(compiler::run_host_fold(n, out)) << n.op();
    return out;
}

}  // namespace

TEST(HostFolds, TransposeOfEveryRank3Permutation) {
    const Shape shape = {2, 3, 5};
    for (DType dt : {DType::kFloat32, DType::kInt64}) {
        std::vector<int64_t> perm = {0, 1, 2};
        do {
            ir::Graph g;
            Shape out_shape = {shape[perm[0]], shape[perm[1]], shape[perm[2]]};
            ir::Node* n = g.add_node("Transpose", {constant(g, "x", iota(dt, shape))}, {{"perm", ir::Attr(perm)}},
                                     {ir::TensorType::of_static(dt, out_shape)});
            Tensor got = run(*n, dt, out_shape);
            const Tensor& x = n->input(0)->constant();
            int64_t i = 0;
            for (int64_t a = 0; a < out_shape[0]; ++a)
                for (int64_t b = 0; b < out_shape[1]; ++b)
                    for (int64_t c = 0; c < out_shape[2]; ++c, ++i) {
                        int64_t idx[3];
                        idx[perm[0]] = a, idx[perm[1]] = b, idx[perm[2]] = c;
                        ASSERT_EQ(got.get_f64(i), x.get_f64((idx[0] * 3 + idx[1]) * 5 + idx[2]))
                            << perm[0] << perm[1] << perm[2] << " at " << i;
                    }
        } while (std::next_permutation(perm.begin(), perm.end()));
    }
}

TEST(HostFolds, ConcatAlongTheMiddleAxis) {
    ir::Graph g;
    ir::Node* n = g.add_node("Concat",
                             {constant(g, "a", iota(DType::kFloat32, {2, 1, 3})), constant(g, "b", iota(DType::kFloat32, {2, 4, 3}, 100)),
                              constant(g, "c", iota(DType::kFloat32, {2, 2, 3}, 200))},
                             {{"axis", ir::Attr(int64_t{-2})}}, {ir::TensorType::of_static(DType::kFloat32, {2, 7, 3})});
    Tensor got = run(*n, DType::kFloat32, {2, 7, 3});
    for (int64_t o = 0; o < 2; ++o)
        for (int64_t m = 0; m < 7; ++m)
            for (int64_t k = 0; k < 3; ++k) {
                const int64_t part = m < 1 ? 0 : m < 5 ? 1 : 2, row = m < 1 ? m : m < 5 ? m - 1 : m - 5;
                const int64_t rows[3] = {1, 4, 2};
                const Tensor& in = n->input(static_cast<size_t>(part))->constant();
                ASSERT_EQ(got.get_f64((o * 7 + m) * 3 + k), in.get_f64((o * rows[part] + row) * 3 + k)) << o << m << k;
            }
}

TEST(HostFolds, ArithmeticBroadcastsAsNumpy) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
        ir::Graph g;
        // [4,1,3] op [2,1]: out [4,2,3]; the second operand's dims align on the right.
        Tensor a = iota(DType::kFloat32, {4, 1, 3}), b = iota(DType::kFloat32, {2, 1}, 9);
        ir::Node* n = g.add_node(op, {constant(g, "a", a), constant(g, "b", b)}, {},
                                 {ir::TensorType::of_static(DType::kFloat32, {4, 2, 3})});
        Tensor got = run(*n, DType::kFloat32, {4, 2, 3});
        for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 2; ++j)
                for (int64_t k = 0; k < 3; ++k) {
                    const float x = a.data_as<float>()[i * 3 + k], y = b.data_as<float>()[j];
                    const std::string o = op;
                    const float want = o == "Add" ? x + y : o == "Sub" ? x - y : o == "Mul" ? x * y : x / y;
                    ASSERT_EQ(got.data_as<float>()[(i * 2 + j) * 3 + k], want) << op << " " << i << j << k;
                }
    }
}

TEST(HostFolds, OtherOpsAndTypesAreLeftToAKernel) {
    ir::Graph g;
    ir::Value* a = constant(g, "a", iota(DType::kFloat32, {3}));
    ir::Value* i = constant(g, "i", iota(DType::kInt64, {3}));
    Tensor out(DType::kFloat32, {3});
    EXPECT_FALSE(compiler::run_host_fold(*g.add_node("Max", {a, a}, {}, {ir::TensorType::of_static(DType::kFloat32, {3})}), out));
    Tensor iout(DType::kInt64, {3});
    EXPECT_FALSE(compiler::run_host_fold(*g.add_node("Add", {i, i}, {}, {ir::TensorType::of_static(DType::kInt64, {3})}), iout));
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {3}));
    EXPECT_FALSE(compiler::run_host_fold(*g.add_node("Mul", {a, x}, {}, {ir::TensorType::of_static(DType::kFloat32, {3})}), out));
}

// Longer walks: a conv weight times its per-output-channel scale (the three inner dims coalesce
// for both operands) and a blocked-layout transpose of rank 6 (outer dims carried across
// planes), against index arithmetic written out here.
TEST(HostFolds, ConvWeightScaleAndBlockedTranspose) {
    {
        ir::Graph g;
        Tensor w = iota(DType::kFloat32, {4, 3, 2, 2}), s = iota(DType::kFloat32, {4, 1, 1, 1}, 7);
        ir::Node* n = g.add_node("Mul", {constant(g, "w", w), constant(g, "s", s)}, {},
                                 {ir::TensorType::of_static(DType::kFloat32, {4, 3, 2, 2})});
        Tensor got = run(*n, DType::kFloat32, {4, 3, 2, 2});
        for (int64_t i = 0; i < 48; ++i)
            ASSERT_EQ(got.data_as<float>()[i], w.data_as<float>()[i] * s.data_as<float>()[i / 12]) << i;
    }
    {
        // Rank 6 with a leading 1, as a blocked weight layout's transposes are: perm {0, 1, 3, 5, 4, 2}.
        ir::Graph g;
        const Shape in_shape = {1, 3, 2, 2, 2, 3};
        const std::vector<int64_t> perm = {0, 1, 3, 5, 4, 2};
        Shape out_shape;
        for (int64_t p : perm) out_shape.push_back(in_shape[static_cast<size_t>(p)]);
        Tensor x = iota(DType::kFloat32, in_shape);
        ir::Node* n = g.add_node("Transpose", {constant(g, "x", x)}, {{"perm", ir::Attr(perm)}},
                                 {ir::TensorType::of_static(DType::kFloat32, out_shape)});
        Tensor got = run(*n, DType::kFloat32, out_shape);
        std::vector<int64_t> idx(6, 0);
        for (int64_t i = 0; i < got.numel(); ++i) {
            int64_t rem = i, in_flat = 0, in_index[6];
            for (size_t d = 6; d-- > 0;) {
                idx[d] = rem % out_shape[d];
                rem /= out_shape[d];
            }
            for (size_t d = 0; d < 6; ++d) in_index[perm[d]] = idx[d];
            for (size_t d = 0; d < 6; ++d) in_flat = in_flat * in_shape[d] + in_index[d];
            ASSERT_EQ(got.data_as<float>()[i], x.data_as<float>()[in_flat]) << i;
        }
    }
}
