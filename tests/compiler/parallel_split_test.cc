// How many chunks the parallel loop of a generated kernel has, at the thread count the model is
// compiled for (te::ScheduleConfig::threads): enough to keep 16 threads busy, and short enough
// that a preempted run (which stops only between iterations) waits for little work. The chunk count is
// read from the emitted C (`env->parallel_for(env->pool, N, ...)`); nothing is compiled.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "compiler/compile.h"
#include "compiler/lower_group.h"
#include "ir/graph.h"

namespace kiln::compiler {
namespace {

using Ints = std::vector<int64_t>;

ir::TensorType f32(const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

Tensor weights(const Shape& s) {
    Tensor t(DType::kFloat32, s);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
}

/// The first unit whose first node is `op`, of `g` after the -O3 pipeline.
KernelUnit unit_of(ir::Graph& g, const std::string& op) {
    optimize_graph(g, CompileOptions{});
    for (const KernelUnit& u : partition_kernels(g))
        if (u.nodes.front()->op() == op) return u;
    ADD_FAILURE() << "no " << op << " unit";
    return {};
}

/// The iteration counts of the kernel's parallel loops.
std::vector<int64_t> parallel_chunks(const std::string& source) {
    std::vector<int64_t> out;
    std::regex re(R"(parallel_for\(env->pool, (\d+)LL)");
    for (auto it = std::sregex_iterator(source.begin(), source.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back(std::stoll((*it)[1]));
    return out;
}

// BERT-base's attention output projection: [1,128,768] x [768,768].
ir::Graph projection() {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, 128, 768}));
    ir::Value* w = g.add_constant("w", weights({768, 768}));
    g.add_output(g.add_node("MatMul", {x, w}, {}, {f32({1, 128, 768})}, {"y"}, "proj")->output(0));
    return g;
}

// Its 12 column tiles of 64 would leave 16 threads idle; at 1 and 2 threads they stay the loop.
TEST(ParallelSplit, BertProjectionKeepsSixteenThreadsBusyAndTwoThreadsUnchanged) {
    ir::Graph g = projection();
    const KernelUnit u = unit_of(g, "KilnMatMulPackedB");
    ASSERT_FALSE(u.nodes.empty());
    const std::string one = lower_unit(u, false, {}, nullptr, 1).source;
    const std::string two = lower_unit(u, false, {}, nullptr, 2).source;
    const std::string sixteen = lower_unit(u, false, {}, nullptr, 16).source;
    EXPECT_EQ(one, two) << "2 threads: the kernel as before";
    const std::vector<int64_t> c1 = parallel_chunks(one), c16 = parallel_chunks(sixteen);
    ASSERT_EQ(c1.size(), 1u) << one;
    ASSERT_EQ(c16.size(), 1u) << sixteen;
    EXPECT_LT(c1[0], 16) << "the column tiles alone (12 of 64 columns) leave threads idle";
    EXPECT_GE(c16[0], 4 * 16) << "column x row tiles: at least 4 chunks per thread";
}

// BERT-base's FFN output projection: [1,128,3072] x [3072,768], 25 M multiply-adds per column
// tile of 64. A preempted run stops only between a parallel loop's iterations, so in a
// preemptible kernel (SessionOptions::preemptible) at any thread count the row tiles join the
// loop and one iteration holds at most a row tile's ~1 M multiply-adds (a bound of work, not
// of time); a kernel that is not preempted keeps its column tiles at 1 and 2 threads (faster).
TEST(ParallelSplit, DeepProjectionIsCutIntoShortIterationsForPreemption) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, 128, 3072}));
    ir::Value* w = g.add_constant("w", weights({3072, 768}));
    g.add_output(g.add_node("MatMul", {x, w}, {}, {f32({1, 128, 768})}, {"y"}, "ffn_out")->output(0));
    const KernelUnit u = unit_of(g, "KilnMatMulPackedB");
    ASSERT_FALSE(u.nodes.empty());
    const double work = 128.0 * 3072 * 768;
    for (int threads : {1, 2, 16}) {
        const std::string src = lower_unit(u, false, {}, nullptr, threads, true).source;
        const std::vector<int64_t> c = parallel_chunks(src);
        ASSERT_EQ(c.size(), 1u) << src;
        EXPECT_LE(work / static_cast<double>(c[0]), 2.0 * 1024 * 1024)
            << threads << " threads: " << c[0] << " iterations of the parallel loop";
    }
    for (int threads : {1, 2}) {
        const std::vector<int64_t> c = parallel_chunks(lower_unit(u, false, {}, nullptr, threads).source);
        ASSERT_EQ(c.size(), 1u);
        EXPECT_EQ(c[0], 12) << threads << " threads, not preemptible: the 12 column tiles of 64";
    }
}

TEST(ParallelSplit, BlockedConvOfOneImageHasRowsTimesChannelBlocks) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({1, 64, 56, 56}));
    ir::Value* w = g.add_constant("w", weights({64, 64, 3, 3}));
    g.add_output(g.add_node("Conv", {x, w}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
                            {f32({1, 64, 56, 56})}, {"y"}, "conv")
                     ->output(0));
    const KernelUnit u = unit_of(g, "KilnConv2dNCHWc");
    ASSERT_FALSE(u.nodes.empty());
    const std::vector<int64_t> c = parallel_chunks(lower_unit(u, false, {}, nullptr, 16).source);
    ASSERT_FALSE(c.empty());
    // (n, output-channel block groups, output rows) fused: at least the 56 rows.
    EXPECT_GE(*std::max_element(c.begin(), c.end()), 56);
}

}  // namespace
}  // namespace kiln::compiler
