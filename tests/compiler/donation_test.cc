// Buffer donation (compiler/donation.h): an output written over the memory of an input the
// caller gives up. The optimizer-style update m' = 0.9 m + g, w' = w - 0.1 m' is one kernel of
// two outputs that reads each input only at the index it writes, so both pairs hold; run with
// the outputs bound to the inputs' tensors, with the sequential and the dataflow executor, the
// values equal plain loops over the same floats. A pair whose input another step reads at other
// indices (a transpose of w), or whose output is not the input's shape, is refused; the step
// graph orders a donated output's writer after the input's other readers.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "compiler/compile.h"
#include "compiler/donation.h"
#include "ir/graph.h"
#include "runtime/model_runner.h"
#include "runtime/step_graph.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kRows = 16, kCols = 48;

ir::TensorType f32(const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

ir::Value* scalar(ir::Graph& g, const std::string& name, float v) {
    Tensor t(DType::kFloat32, {});
    t.set_f64(0, v);
    return g.add_constant(name, t);
}

/// Inputs w, m, g [16, 48]; outputs m' = 0.9 m + g, w' = w - 0.1 m', and, with `transposed_reader`,
/// t = Transpose(w) (another reader of w, at other indices).
ir::Graph update_graph(bool transposed_reader) {
    ir::Graph g;
    const ir::TensorType t = f32({kRows, kCols});
    ir::Value* w = g.add_input("w", t);
    ir::Value* m = g.add_input("m", t);
    ir::Value* gr = g.add_input("g", t);
    ir::Value* mm = g.add_node("Mul", {m, scalar(g, "mu", 0.9f)}, {}, {t}, {"m_mu"}, "mul_mu")->output(0);
    ir::Value* m2 = g.add_node("Add", {mm, gr}, {}, {t}, {"m_new"}, "add_g")->output(0);
    ir::Value* step = g.add_node("Mul", {m2, scalar(g, "lr", 0.1f)}, {}, {t}, {"step"}, "mul_lr")->output(0);
    ir::Value* w2 = g.add_node("Sub", {w, step}, {}, {t}, {"w_new"}, "sub")->output(0);
    g.add_output(w2);
    g.add_output(m2);
    if (transposed_reader) {
        ir::AttrMap perm;
        perm["perm"] = ir::Attr(std::vector<int64_t>{1, 0});
        g.add_output(g.add_node("Transpose", {w}, perm, {f32({kCols, kRows})}, {"wt"}, "tr")->output(0));
    }
    return g;
}

std::vector<std::pair<int, int>> sorted(std::vector<std::pair<int, int>> v) {
    std::sort(v.begin(), v.end());
    return v;
}

Tensor filled(float base) {
    Tensor t(DType::kFloat32, {kRows, kCols});
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, base + 0.01 * static_cast<double>(i % 97) - 0.3);
    return t;
}

TEST(Donation, TheUpdateWritesBothOutputsOverItsInputsAndComputesThePlainLoops) {
    for (const runtime::ExecutorChoice executor : {runtime::ExecutorChoice::kSequential, runtime::ExecutorChoice::kDataflow}) {
        ir::Graph g = update_graph(false);
        CompileOptions opts;
        opts.donate = {{0, 0}, {1, 1}};  // w' over w, m' over m
        opts.plan_for_concurrency = executor == runtime::ExecutorChoice::kDataflow;
        CompiledModel cm = compile(g, opts);
        ASSERT_EQ(sorted(cm.executable->donations), (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}}));
        EXPECT_EQ(cm.memory.donated, 2);
        EXPECT_EQ(cm.memory.donated_bytes, 2u * kRows * kCols * sizeof(float));
        EXPECT_NE(cm.memory.report.find("donated inputs: 2 of 2"), std::string::npos) << cm.memory.report;

        runtime::RunnerOptions ro;
        ro.threads = 2;
        ro.executor = executor;
        runtime::ModelRunner runner(ro);
        runner.set_executable(cm.executable);
        Tensor w = filled(1.0f), m = filled(-0.5f), gr = filled(0.25f);
        std::vector<float> want_w(w.numel()), want_m(m.numel());
        for (int64_t i = 0; i < w.numel(); ++i) {  // the kernel's float order: (m * 0.9 + g), w - m' * 0.1
            const float mi = static_cast<float>(m.get_f64(i)) * 0.9f + static_cast<float>(gr.get_f64(i));
            want_m[i] = mi;
            want_w[i] = static_cast<float>(w.get_f64(i)) - mi * 0.1f;
        }
        const void* w_data = w.data();
        const void* m_data = m.data();
        const std::vector<Tensor> inputs = {w, m, gr};
        const std::vector<const Tensor*> into = {&inputs[0], &inputs[1]};
        runtime::RunControls controls;
        controls.outputs_into = &into;
        std::vector<Tensor> outs;
        ASSERT_TRUE(runner.run(inputs, outs, controls).ok());
        ASSERT_EQ(outs.size(), 2u);
        EXPECT_EQ(outs[0].data(), w_data) << "w' is written over w";
        EXPECT_EQ(outs[1].data(), m_data) << "m' is written over m";
        for (int64_t i = 0; i < w.numel(); ++i) {
            ASSERT_NEAR(outs[0].get_f64(i), want_w[i], 1e-6) << "w' at " << i;
            ASSERT_NEAR(outs[1].get_f64(i), want_m[i], 1e-6) << "m' at " << i;
        }
    }
}

TEST(Donation, AnInputReadAtOtherIndicesOrAnotherShapeIsNotDonatedOverWhatItStillReads) {
    ir::Graph g = update_graph(true);
    CompileOptions opts;
    // w' over w (w is also transposed), m' over m, and the transpose over g (another shape).
    opts.donate = {{0, 0}, {1, 1}, {2, 2}};
    CompiledModel cm = compile(g, opts);
    const std::vector<std::pair<int, int>>& d = cm.executable->donations;
    EXPECT_EQ(std::count(d.begin(), d.end(), std::make_pair(2, 2)), 0) << "a [48, 16] output over a [16, 48] input";
    EXPECT_EQ(std::count(d.begin(), d.end(), std::make_pair(1, 1)), 1) << "m is read by the update only";
    // w' over w holds only where the transpose reads w before the update in step order; run
    // with every kept pair bound, the transpose sees the old w either way.
    runtime::ModelRunner runner(runtime::RunnerOptions{});
    runner.set_executable(cm.executable);
    const Tensor w_old = filled(1.0f);
    const std::vector<Tensor> inputs = {w_old.clone(), filled(-0.5f), filled(0.25f)};
    std::vector<const Tensor*> into(3, nullptr);
    for (const auto& [o, i] : d) into[static_cast<size_t>(o)] = &inputs[static_cast<size_t>(i)];
    runtime::RunControls controls;
    controls.outputs_into = &into;
    std::vector<Tensor> outs;
    ASSERT_TRUE(runner.run(inputs, outs, controls).ok());
    ASSERT_EQ(outs.size(), 3u);
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t c = 0; c < kCols; ++c)
            ASSERT_EQ(outs[2].get_f64(c * kRows + r), w_old.get_f64(r * kCols + c)) << "wt at " << c << ", " << r;
}

TEST(Donation, OffersOutOfRangeOrTwiceAreDropped) {
    ir::Graph g = update_graph(false);
    CompileOptions opts;
    opts.donate = {{0, 0}, {0, 1}, {1, 0}, {5, 1}, {1, -1}};
    CompiledModel cm = compile(g, opts);
    EXPECT_EQ(cm.executable->donations, (std::vector<std::pair<int, int>>{{0, 0}}));
}

TEST(Donation, TheStepGraphOrdersTheWriterAfterTheInputsReaders) {
    // Buffers: 0 input, 1 and 2 outputs. Step 0 reads b0 into b1; step 1 reads b0 into b2.
    runtime::Executable exe;
    exe.buffers = {{"in", DType::kFloat32, {4}, runtime::BufferRole::kInput, {}},
                   {"a", DType::kFloat32, {4}, runtime::BufferRole::kOutput, {}},
                   {"b", DType::kFloat32, {4}, runtime::BufferRole::kOutput, {}}};
    exe.inputs = {0};
    exe.outputs = {1, 2};
    runtime::StepDesc s0, s1;
    s0.kernel = s1.kernel = 0;
    s0.args = {0, 1};
    s1.args = {0, 2};
    s0.num_inputs = s1.num_inputs = 1;
    exe.steps = {s0, s1};
    EXPECT_EQ(runtime::build_step_graph(exe).num_deps, (std::vector<int>{0, 0})) << "two readers: independent";
    EXPECT_EQ(verified_donations(exe, {{}, {{2, 0}}}, {{1, 0}}), (std::vector<std::pair<int, int>>{{1, 0}}));
    EXPECT_TRUE(verified_donations(exe, {{{1, 0}}, {}}, {{0, 0}}).empty()) << "step 1 reads the input after step 0";
    EXPECT_TRUE(verified_donations(exe, {{}, {}}, {{1, 0}}).empty()) << "the writer does not offer the pair";
    exe.donations = {{1, 0}};  // b written over in: step 1 waits for step 0's read
    const runtime::StepGraph sg = runtime::build_step_graph(exe);
    EXPECT_EQ(sg.num_deps, (std::vector<int>{0, 1}));
    EXPECT_EQ(sg.consumers[0], (std::vector<int>{1}));
}

}  // namespace
}  // namespace kiln::compiler
