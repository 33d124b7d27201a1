// Control flow lowered to TF1 frames (compiler/lower_to_frames.h) and run by the FrameExecutor
// (runtime/frame_executor.h): Loop and If against the graph interpreter (host If/Loop) and naive
// loops written here; independent iterations with 1 and 2 inter-op threads (same result, more
// than one iteration live, the parallel_iterations bound kept); an untaken branch's kernels
// skipped as dead; nested loops reading outer values; errors naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "compiler/compile_frames.h"
#include "compiler/graph_interpreter.h"
#include "runtime/caching_allocator.h"
#include "runtime/frame_executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"
#include "support/error.h"
#include "support/scalar_tensor.h"

namespace kiln::compiler {
namespace {

using ir::TensorType;

TensorType f32(Shape s) {
    return TensorType::of_static(DType::kFloat32, s);
}
const TensorType kI64 = TensorType::of_static(DType::kInt64, {});
const TensorType kBool = TensorType::of_static(DType::kBool, {});

Tensor filled(Shape s, float start, float step) {
    Tensor t(DType::kFloat32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = start + step * static_cast<float>(i % 7);
    return t;
}

/// A Loop body (i, cond, y) -> (cond, y * k + float(i) [+ float(outer)]); with `outer`, it reads
/// that outer value by name.
std::shared_ptr<ir::Graph> affine_body(Shape s, const std::string& prefix, const std::string& outer = "") {
    auto b = std::make_shared<ir::Graph>();
    ir::Value* i = b->add_input(prefix + "i", kI64);
    ir::Value* c = b->add_input(prefix + "c", kBool);
    ir::Value* y = b->add_input(prefix + "y", f32(s));
    ir::Value* k = b->add_constant(prefix + "k", [] {
        Tensor t(DType::kFloat32, {});
        t.set_f64(0, 0.5);
        return t;
    }());
    ir::Value* fi = b->add_node("Cast", {i}, {{"to", int64_t{1}}}, {f32({})}, {prefix + "fi"})->output(0);
    if (!outer.empty()) {
        ir::Value* o = b->add_outer_input(outer, kI64);
        ir::Value* fo = b->add_node("Cast", {o}, {{"to", int64_t{1}}}, {f32({})}, {prefix + "fo"})->output(0);
        fi = b->add_node("Add", {fi, fo}, {}, {f32({})}, {prefix + "fio"})->output(0);
    }
    ir::Value* m = b->add_node("Mul", {y, k}, {}, {f32(s)}, {prefix + "m"})->output(0);
    ir::Value* a = b->add_node("Add", {m, fi}, {}, {f32(s)}, {prefix + "a"})->output(0);
    ir::Value* co = b->add_node("Identity", {c}, {}, {kBool}, {prefix + "co"})->output(0);
    b->set_outputs({co, a});
    return b;
}

/// y = Loop(M, cond=true, x) { y * 0.5 + i }.
std::shared_ptr<ir::Graph> affine_loop(int64_t trips) {
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({4}));
    ir::Value* m = g->add_constant("M", scalar_i64(trips));
    ir::Value* c = g->add_constant("cond", scalar_bool(true));
    ir::Node* loop =
        g->add_node("Loop", {m, c, x}, {{"body", ir::GraphAttr(affine_body({4}, "b_"))}}, {f32({4})}, {"y"}, "loop");
    g->add_output(loop->output(0));
    return g;
}

std::vector<float> floats(const Tensor& t) {
    return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

std::vector<float> interpret(std::shared_ptr<ir::Graph> g, const std::vector<Datum>& ins) {
    runtime::ThreadPool pool(1);
    auto alloc = runtime::make_session_allocator(0);
    GraphInterpreter interp(g, &pool, alloc.get());
    return floats(interp.run(ins).at(0).tensor());
}

struct FramesRun {
    std::vector<Tensor> outputs;
    Status status;
    runtime::FrameRunStats stats;
};

FramesRun run_frames(ir::Graph& g, const std::vector<Tensor>& ins, int inter_threads,
                     FramesLoweringOptions lowering = {}, CompileOptions opts = {}) {
    CompiledModel m = compile_frames(g, opts, lowering);
    runtime::ThreadPool intra(1);
    std::unique_ptr<runtime::InterOpThreadPool> inter;
    if (inter_threads > 1) inter = std::make_unique<runtime::InterOpThreadPool>(inter_threads);
    runtime::FrameExecutor ex(m.executable, &intra, inter.get());
    FramesRun r;
    r.status = ex.run(ins, r.outputs);
    r.stats = ex.last_run_stats();
    return r;
}

TEST(Frames, LoopMatchesTheInterpreterAndANaiveLoop) {
    Tensor x = filled({4}, 1, 0.25f);
    std::vector<float> want = floats(x);
    for (int i = 0; i < 6; ++i)
        for (float& v : want) v = v * 0.5f + static_cast<float>(i);
    EXPECT_EQ(interpret(affine_loop(6), {x}), want);
    auto g = affine_loop(6);
    FramesRun r = run_frames(*g, {x}, 1);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(floats(r.outputs.at(0)), want);
    EXPECT_EQ(r.stats.iterations, 7);  // six bodies and the iteration whose predicate is false
}

TEST(Frames, ZeroTripsReturnTheInitialValue) {
    Tensor x = filled({4}, 3, 1);
    auto g = affine_loop(0);
    FramesRun r = run_frames(*g, {x}, 2);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(floats(r.outputs.at(0)), floats(x));
    EXPECT_EQ(r.stats.kernels_run, 1);  // only i < M; the body's kernels are dead
}

/// out = If(c) { x * 2 } else { x + 10 }, reading x from the outer scope.
std::shared_ptr<ir::Graph> if_graph() {
    auto g = std::make_shared<ir::Graph>();
    g->add_input("x", f32({4}));  // read by the branches as an outer value
    ir::Value* c = g->add_input("c", kBool);
    auto then_g = std::make_shared<ir::Graph>();
    ir::Value* tx = then_g->add_outer_input("x", f32({4}));
    ir::Value* two = then_g->add_constant("two", [] {
        Tensor t(DType::kFloat32, {});
        t.set_f64(0, 2);
        return t;
    }());
    then_g->add_output(then_g->add_node("Mul", {tx, two}, {}, {f32({4})}, {"t"})->output(0));
    auto else_g = std::make_shared<ir::Graph>();
    ir::Value* ex = else_g->add_outer_input("x", f32({4}));
    ir::Value* ten = else_g->add_constant("ten", [] {
        Tensor t(DType::kFloat32, {});
        t.set_f64(0, 10);
        return t;
    }());
    else_g->add_output(else_g->add_node("Add", {ex, ten}, {}, {f32({4})}, {"e"})->output(0));
    ir::Node* n =
        g->add_node("If", {c}, {{"then_branch", ir::GraphAttr(then_g)}, {"else_branch", ir::GraphAttr(else_g)}},
                    {f32({4})}, {"out"}, "if");
    g->add_output(n->output(0));
    return g;
}

TEST(Frames, IfTakesOneBranchAndTheOtherIsDead) {
    Tensor x = filled({4}, -1, 0.5f);
    for (bool c : {true, false}) {
        std::vector<float> want = floats(x);
        for (float& v : want) v = c ? v * 2 : v + 10;
        EXPECT_EQ(interpret(if_graph(), {x, scalar_bool(c)}), want);
        auto g = if_graph();
        FramesRun r = run_frames(*g, {x, scalar_bool(c)}, 2);
        ASSERT_TRUE(r.status.ok()) << r.status.message();
        EXPECT_EQ(floats(r.outputs.at(0)), want) << "cond " << c;
        EXPECT_EQ(r.stats.kernels_run, 1) << "cond " << c;   // the taken branch's kernel only
        EXPECT_EQ(r.stats.kernels_dead, 1) << "cond " << c;  // the other one, skipped as dead
    }
}

/// Loop(M) { acc += (x * float(i)) @ W @ W }: iterations share only the cheap add chain.
std::shared_ptr<ir::Graph> independent_loop(int64_t trips, int64_t n) {
    auto b = std::make_shared<ir::Graph>();
    ir::Value* i = b->add_input("i", kI64);
    ir::Value* c = b->add_input("c", kBool);
    ir::Value* acc = b->add_input("acc", f32({n, n}));
    ir::Value* x = b->add_outer_input("x", f32({n, n}));
    ir::Value* w = b->add_constant("W", filled({n, n}, -0.5f, 1.0f / 16));
    ir::Value* fi = b->add_node("Cast", {i}, {{"to", int64_t{1}}}, {f32({})}, {"fi"})->output(0);
    ir::Value* xi = b->add_node("Mul", {x, fi}, {}, {f32({n, n})}, {"xi"})->output(0);
    ir::Value* h = b->add_node("MatMul", {xi, w}, {}, {f32({n, n})}, {"h"})->output(0);
    ir::Value* h2 = b->add_node("MatMul", {h, w}, {}, {f32({n, n})}, {"h2"})->output(0);
    ir::Value* a = b->add_node("Add", {acc, h2}, {}, {f32({n, n})}, {"acc_out"})->output(0);
    b->set_outputs({b->add_node("Identity", {c}, {}, {kBool}, {"co"})->output(0), a});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* gx = g->add_input("x", f32({n, n}));
    ir::Value* acc0 = g->add_input("acc0", f32({n, n}));
    ir::Node* loop =
        g->add_node("Loop", {g->add_constant("M", scalar_i64(trips)), g->add_constant("cond", scalar_bool(true)), acc0},
                    {{"body", ir::GraphAttr(b)}}, {f32({n, n})}, {"acc"}, "loop");
    (void)gx;
    g->add_output(loop->output(0));
    return g;
}

TEST(Frames, IndependentIterationsGiveTheSameResultWithOneAndTwoThreads) {
    const int64_t n = 32, trips = 16;
    Tensor x = filled({n, n}, 0.25f, 0.125f), acc0 = filled({n, n}, 1, 0);
    std::vector<float> ref = interpret(independent_loop(trips, n), {x, acc0});
    auto g1 = independent_loop(trips, n);
    FramesRun one = run_frames(*g1, {x, acc0}, 1);
    ASSERT_TRUE(one.status.ok()) << one.status.message();
    auto g2 = independent_loop(trips, n);
    FramesRun two = run_frames(*g2, {x, acc0}, 2);
    ASSERT_TRUE(two.status.ok()) << two.status.message();
    EXPECT_EQ(floats(one.outputs.at(0)), floats(two.outputs.at(0)));  // same kernels, same order of adds
    std::vector<float> got = floats(two.outputs.at(0));
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], ref[k], 1e-4 * (1 + std::fabs(ref[k]))) << k;
    EXPECT_GT(two.stats.peak_live_iterations, 1);  // iteration i+1 started before i ended
    EXPECT_LE(two.stats.peak_live_iterations, 10);
    auto g3 = independent_loop(trips, n);
    FramesLoweringOptions serial;
    serial.parallel_iterations = 1;
    FramesRun bounded = run_frames(*g3, {x, acc0}, 2, serial);
    ASSERT_TRUE(bounded.status.ok()) << bounded.status.message();
    EXPECT_EQ(bounded.stats.peak_live_iterations, 1);
    EXPECT_EQ(floats(bounded.outputs.at(0)), floats(two.outputs.at(0)));
}

/// Loop(3) { y = Loop(4) { y * 0.5 + float(j) + float(i) } }: the inner body reads the outer
/// body's iteration number i by name.
std::shared_ptr<ir::Graph> nested_loop() {
    auto outer = std::make_shared<ir::Graph>();
    ir::Value* i = outer->add_input("o_i", kI64);
    ir::Value* c = outer->add_input("o_c", kBool);
    ir::Value* y = outer->add_input("o_y", f32({4}));
    ir::Value* m = outer->add_constant("M2", scalar_i64(4));
    ir::Node* inner = outer->add_node("Loop", {m, c, y}, {{"body", ir::GraphAttr(affine_body({4}, "in_", "o_i"))}},
                                      {f32({4})}, {"o_y2"}, "inner");
    (void)i;
    outer->set_outputs({outer->add_node("Identity", {c}, {}, {kBool}, {"o_co"})->output(0), inner->output(0)});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({4}));
    ir::Node* loop =
        g->add_node("Loop", {g->add_constant("M", scalar_i64(3)), g->add_constant("cond", scalar_bool(true)), x},
                    {{"body", ir::GraphAttr(outer)}}, {f32({4})}, {"y"}, "outer");
    g->add_output(loop->output(0));
    return g;
}

TEST(Frames, NestedLoopsReadOuterValues) {
    Tensor x = filled({4}, 2, 1);
    std::vector<float> want = floats(x);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j)
            for (float& v : want) v = v * 0.5f + (static_cast<float>(j) + static_cast<float>(i));
    EXPECT_EQ(interpret(nested_loop(), {x}), want);
    for (int threads : {1, 2}) {
        auto g = nested_loop();
        FramesRun r = run_frames(*g, {x}, threads);
        ASSERT_TRUE(r.status.ok()) << r.status.message();
        EXPECT_EQ(floats(r.outputs.at(0)), want) << threads << " threads";
        // outer: 4 (3 bodies + the exit); inner: 5 per outer body, and 1 entered dead in the exit.
        EXPECT_EQ(r.stats.iterations, 4 + 3 * 5 + 1);
    }
}

// Many runs of one executor, 4 inter-op threads, 3 iterations in flight: the deferral of a new
// iteration until the oldest is done, nested frames finishing out of order, every run exact.
TEST(Frames, ManyRunsWithFourThreadsAndAWindowOfThree) {
    Tensor x = filled({4}, 2, 1);
    std::vector<float> want = interpret(nested_loop(), {x});
    auto g = nested_loop();
    FramesLoweringOptions window;
    window.parallel_iterations = 3;
    CompiledModel m = compile_frames(*g, {}, window);
    runtime::ThreadPool intra(1);
    runtime::InterOpThreadPool inter(4);
    runtime::FrameExecutor ex(m.executable, &intra, &inter);
    for (int run = 0; run < 50; ++run) {
        std::vector<Tensor> outs;
        Status s = ex.run({x}, outs);
        ASSERT_TRUE(s.ok()) << "run " << run << ": " << s.message();
        ASSERT_EQ(floats(outs.at(0)), want) << "run " << run;
        ASSERT_LE(ex.last_run_stats().peak_live_iterations, 3);
    }
}

TEST(Frames, ALoopPastItsBoundIsAnErrorNamingIt) {
    auto g = affine_loop(100);
    FramesLoweringOptions bounded;
    bounded.max_iterations = 5;
    FramesRun r = run_frames(*g, {filled({4}, 0, 1)}, 2, bounded);
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find("loop frame 'loop' exceeded its bound of 5 iterations"), std::string::npos)
        << r.status.message();
    EXPECT_NE(r.status.message().find("node 'loop/next_iteration"), std::string::npos) << r.status.message();
}

TEST(Frames, AValueCrossingFramesWithoutEnterIsAnError) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({4}));
    ir::Value* neg = g.add_node("Neg", {x}, {}, {f32({4})}, {"neg"}, "neg")->output(0);
    ir::Value* e = g.add_node("Enter", {x}, {{"frame", std::string("f")}}, {f32({4})}, {"e"}, "enter")->output(0);
    ir::Value* a = g.add_node("Add", {e, neg}, {}, {f32({4})}, {"a"}, "bad_add")->output(0);
    g.add_output(g.add_node("Exit", {a}, {}, {f32({4})}, {"out"}, "exit")->output(0));
    CompileOptions unfused;  // Neg and Add as steps of their own
    unfused.opt_level = 0;
    FramesRun r = run_frames(g, {filled({4}, 0, 1)}, 1, {}, unfused);
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find("node 'bad_add'"), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find("through Enter"), std::string::npos) << r.status.message();
}

TEST(Frames, ALoopCarriedShapeChangeIsAnErrorNamingTheLoop) {
    auto b = std::make_shared<ir::Graph>();
    b->add_input("i", kI64);
    ir::Value* c = b->add_input("c", kBool);
    ir::Value* y = b->add_input("y", f32({2}));
    ir::Value* cat = b->add_node("Concat", {y, y}, {{"axis", int64_t{0}}}, {f32({4})}, {"cat"})->output(0);
    b->set_outputs({c, cat});
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({2}));
    ir::Node* loop =
        g.add_node("Loop", {g.add_constant("M", scalar_i64(2)), g.add_constant("cond", scalar_bool(true)), x},
                   {{"body", ir::GraphAttr(b)}}, {f32({2})}, {"out"}, "growing");
    g.add_output(loop->output(0));
    try {
        compile_frames(g, {});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("Loop 'growing'"), std::string::npos) << e.what();
    }
}

TEST(Frames, OtherExecutorsRefuseControlSteps) {
    auto g = affine_loop(2);
    CompiledModel m = compile_frames(*g, {});
    runtime::CpuAllocator alloc;
    runtime::SequentialExecutor seq(m.executable, nullptr, &alloc);
    std::vector<Tensor> outs;
    Status s = seq.run({filled({4}, 0, 1)}, outs);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("only the frames executor runs it"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kiln::compiler
