// The VM (runtime/vm) and lower_control_flow: a Loop with a compiled body against the graph
// interpreter (the oracle) and a naive loop written here; errors that name the node (a trip
// count beyond the bound, a loop-carried value whose shape changes); a body that changes its
// carried shape falls back to the interpreter and is still right.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>

#include "compiler/graph_interpreter.h"
#include "compiler/lower_control_flow.h"
#include "compiler/vm_model.h"
#include "runtime/caching_allocator.h"
#include "runtime/thread_pool.h"
#include "runtime/vm/vm.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

using ir::TensorType;
namespace vm = runtime::vm;

TensorType f32(Shape s) { return TensorType::of_static(DType::kFloat32, s); }

Tensor i64_scalar(int64_t v) {
    Tensor t(DType::kInt64, {});
    t.set_i64(0, v);
    return t;
}

// Loop(M, -, y0) with body (i, c, y) -> (c, y * w + 1, y): w is read from the outer scope (a
// graph input, so a param of the body), the old y is stacked as a scan output.
std::shared_ptr<ir::Graph> affine_loop(int64_t n) {
    auto body = std::make_shared<ir::Graph>();
    body->name = "body";
    body->add_input("i", TensorType::of_static(DType::kInt64, {}));
    ir::Value* c = body->add_input("c", TensorType::of_static(DType::kBool, {}));
    ir::Value* y = body->add_input("y", f32({n}));
    ir::Value* w = body->add_outer_input("w", f32({n}));
    Tensor one(DType::kFloat32, {});
    one.set_f64(0, 1.0);
    ir::Node* mul = body->add_node("Mul", {y, w}, {}, {f32({n})});
    ir::Node* add = body->add_node("Add", {mul->output(0), body->add_constant("one", one)}, {}, {f32({n})});
    ir::Node* keep = body->add_node("Identity", {y}, {}, {f32({n})});
    body->set_outputs({c, add->output(0), keep->output(0)});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* m = g->add_input("M", TensorType::of_static(DType::kInt64, {}));
    ir::Value* y0 = g->add_input("y0", f32({n}));
    g->add_input("w", f32({n}));
    ir::Node* loop = g->add_node("Loop", {m, nullptr, y0}, {{"body", ir::GraphAttr(body)}},
                                 {f32({n}), TensorType(DType::kFloat32, {ir::Dim::sym("?"), n})}, {"y", "ys"}, "affine_loop");
    g->set_outputs({loop->output(0), loop->output(1)});
    return g;
}

class VmTest : public ::testing::Test {
protected:
    LowerContext ctx() {
        LowerContext c;
        c.compile.compile_jobs = 1;
        c.pool = &pool_;
        c.alloc = alloc_.get();
        return c;
    }
    runtime::ThreadPool pool_{1};
    std::shared_ptr<runtime::CachingAllocator> alloc_ = runtime::make_session_allocator(0);
};

TEST_F(VmTest, LoopWithCompiledBodyMatchesInterpreterAndNaiveLoop) {
    const int64_t n = 4, trips = 6;
    auto g = affine_loop(n);
    Tensor y0(DType::kFloat32, {n}), w(DType::kFloat32, {n});
    for (int64_t k = 0; k < n; ++k) {
        y0.set_f64(k, 0.5 * static_cast<double>(k) - 1);
        w.set_f64(k, 0.25 * static_cast<double>(k + 1));
    }
    ControlFlowLowering l = lower_control_flow(*g, {{}, {n}, {n}}, ctx());
    EXPECT_EQ(l.bodies_compiled, 1);
    EXPECT_EQ(l.bodies_interpreted, 0);
    vm::VirtualMachine machine(l.program);
    std::vector<Tensor> got;
    for (int run = 0; run < 2; ++run) {  // the second run reuses the register files
        ASSERT_TRUE(machine.run({i64_scalar(trips), y0, w}, got).ok());
    }
    GraphInterpreter interp(g, &pool_, alloc_.get());
    std::vector<Datum> want = interp.run({Datum(i64_scalar(trips)), Datum(y0), Datum(w)});
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[1].shape(), (Shape{trips, n}));
    for (int64_t k = 0; k < n; ++k) {
        double y = y0.get_f64(k);
        for (int64_t t = 0; t < trips; ++t) {
            EXPECT_FLOAT_EQ(static_cast<float>(got[1].get_f64(t * n + k)), static_cast<float>(y)) << "step " << t;
            EXPECT_EQ(got[1].get_f64(t * n + k), want[1].tensor().get_f64(t * n + k));
            y = y * w.get_f64(k) + 1;
        }
        EXPECT_FLOAT_EQ(static_cast<float>(got[0].get_f64(k)), static_cast<float>(y));
        EXPECT_EQ(got[0].get_f64(k), want[0].tensor().get_f64(k));
    }
    EXPECT_EQ(machine.iterations(), 2 * trips);
}

TEST_F(VmTest, TripCountBeyondTheBoundNamesTheNode) {
    auto g = affine_loop(2);
    ControlFlowLowering l = lower_control_flow(*g, {{}, {2}, {2}}, ctx());
    l.program->max_trips = 3;
    vm::VirtualMachine machine(l.program);
    std::vector<Tensor> got;
    Status st = machine.run({i64_scalar(5), Tensor(DType::kFloat32, {2}), Tensor(DType::kFloat32, {2})}, got);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("affine_loop"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("exceeds the bound"), std::string::npos) << st.message();
}

// A callee whose output grows by one element per call: a loop body whose carried shape changes.
class GrowingCallee final : public vm::Callee {
public:
    Status call(const Tensor* const* ins, size_t, Tensor* const* outs, const char*, size_t) override {
        *outs[0] = Tensor(DType::kFloat32, {ins[0]->numel() + 1});
        return Status::ok_status();
    }
    std::string describe() const override { return "growing"; }
};

TEST(Vm, CarriedShapeChangeNamesTheNode) {
    auto p = std::make_shared<vm::Program>();
    p->callees.push_back(std::make_shared<GrowingCallee>());
    vm::Function main, body;
    main.name = "main";
    main.num_regs = 3;  // r0 M, r1 y0, r2 y
    main.types.resize(3);
    main.params = {0, 1};
    main.results = {2};
    vm::Instr loop{vm::Op::kLoop, 1, 1, {0, -1, 1}, {2}, {}, "grow_loop"};
    main.code = {loop, vm::Instr{vm::Op::kRet}};
    body.name = "body";
    body.num_regs = 4;  // r0 iter, r1 cond, r2 y, r3 y'
    body.types.resize(4);
    body.params = {0, 1, 2};
    body.results = {1, 3};
    body.code = {vm::Instr{vm::Op::kCall, 0, -1, {2}, {3}, {}, "grow"}, vm::Instr{vm::Op::kRet}};
    p->functions = {main, body};
    vm::VirtualMachine machine(p);
    std::vector<Tensor> got;
    Status st = machine.run({i64_scalar(3), Tensor(DType::kFloat32, {2})}, got);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("grow_loop"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("changed from f32[2] to f32[3]"), std::string::npos) << st.message();
}

// Body (i, c, acc) -> (c, Concat(acc, acc)): the carried shape doubles, so the lowering leaves
// the Loop to the graph interpreter; the VM program still gives the interpreter's result.
TEST_F(VmTest, BodyChangingItsShapeFallsBackToTheInterpreter) {
    auto body = std::make_shared<ir::Graph>();
    body->add_input("i", TensorType::of_static(DType::kInt64, {}));
    ir::Value* c = body->add_input("c", TensorType::of_static(DType::kBool, {}));
    ir::Value* acc = body->add_input("acc", TensorType(DType::kFloat32, {ir::Dim::sym("?")}));
    ir::Node* cat = body->add_node("Concat", {acc, acc}, {{"axis", int64_t{0}}}, {TensorType(DType::kFloat32, {ir::Dim::sym("?")})});
    body->set_outputs({c, cat->output(0)});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* m = g->add_input("M", TensorType::of_static(DType::kInt64, {}));
    ir::Value* x = g->add_input("x", f32({1}));
    ir::Node* loop = g->add_node("Loop", {m, nullptr, x}, {{"body", ir::GraphAttr(body)}},
                                 {TensorType(DType::kFloat32, {ir::Dim::sym("?")})}, {"y"}, "doubling");
    g->add_output(loop->output(0));
    ControlFlowLowering l = lower_control_flow(*g, {{}, {1}}, ctx());
    EXPECT_EQ(l.bodies_interpreted, 1);
    ASSERT_EQ(l.notes.size(), 1u);
    EXPECT_NE(l.notes[0].find("turns loop-carried value 0 from f32[1] into f32[2]"), std::string::npos) << l.notes[0];
    vm::VirtualMachine machine(l.program);
    Tensor one(DType::kFloat32, {1});
    one.set_f64(0, 3.0);
    std::vector<Tensor> got;
    ASSERT_TRUE(machine.run({i64_scalar(3), one}, got).ok());
    ASSERT_EQ(got[0].shape(), (Shape{8}));
    for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(got[0].get_f64(k), 3.0);
}

// A while loop: M = INT64_MAX with a condition (the body's `i < 3`); its scan output is not
// preallocated for M slices, and it stops after 4 iterations, as the interpreter does.
TEST_F(VmTest, WhileLoopWithHugeTripCountStopsOnItsCondition) {
    auto body = std::make_shared<ir::Graph>();
    ir::Value* i = body->add_input("i", TensorType::of_static(DType::kInt64, {}));
    body->add_input("c", TensorType::of_static(DType::kBool, {}));
    ir::Value* y = body->add_input("y", f32({2}));
    Tensor one(DType::kFloat32, {}), three(DType::kInt64, {});
    one.set_f64(0, 1.0);
    three.set_i64(0, 3);
    ir::Node* less = body->add_node("Less", {i, body->add_constant("three", three)}, {},
                                    {TensorType::of_static(DType::kBool, {})});
    ir::Node* add = body->add_node("Add", {y, body->add_constant("one", one)}, {}, {f32({2})});
    ir::Node* keep = body->add_node("Identity", {y}, {}, {f32({2})});
    body->set_outputs({less->output(0), add->output(0), keep->output(0)});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* m = g->add_input("M", TensorType::of_static(DType::kInt64, {}));
    ir::Value* c = g->add_input("cond", TensorType::of_static(DType::kBool, {}));
    ir::Value* y0 = g->add_input("y0", f32({2}));
    ir::Node* loop = g->add_node("Loop", {m, c, y0}, {{"body", ir::GraphAttr(body)}},
                                 {f32({2}), TensorType(DType::kFloat32, {ir::Dim::sym("?"), 2})}, {"y", "ys"}, "while");
    g->set_outputs({loop->output(0), loop->output(1)});
    ControlFlowLowering l = lower_control_flow(*g, {{}, {}, {2}}, ctx());
    EXPECT_EQ(l.bodies_compiled, 1);
    vm::VirtualMachine machine(l.program);
    Tensor t(DType::kBool, {}), start(DType::kFloat32, {2});
    t.set_i64(0, 1);
    start.set_f64(1, 10.0);
    const std::vector<Tensor> ins{i64_scalar(std::numeric_limits<int64_t>::max()), t, start};
    std::vector<Tensor> got;
    ASSERT_TRUE(machine.run(ins, got).ok());
    GraphInterpreter interp(g, &pool_, alloc_.get());
    std::vector<Datum> want = interp.run(std::vector<Datum>(ins.begin(), ins.end()));
    ASSERT_EQ(got[1].shape(), (Shape{4, 2}));
    ASSERT_EQ(want[1].tensor().shape(), (Shape{4, 2}));
    EXPECT_EQ(got[0].get_f64(0), 4.0);
    EXPECT_EQ(got[0].get_f64(1), 14.0);
    for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(got[1].get_f64(k), want[1].tensor().get_f64(k)) << k;
}

// A while loop whose condition stays true runs until RunOptions::terminate is set: the VM checks
// it before each iteration and stops with kCancelled naming the node (never a hang).
TEST_F(VmTest, TerminateStopsALoopThatNeverEnds) {
    auto body = std::make_shared<ir::Graph>();
    body->add_input("i", TensorType::of_static(DType::kInt64, {}));
    ir::Value* c = body->add_input("c", TensorType::of_static(DType::kBool, {}));
    ir::Value* y = body->add_input("y", f32({2}));
    Tensor one(DType::kFloat32, {});
    one.set_f64(0, 1.0);
    ir::Node* add = body->add_node("Add", {y, body->add_constant("one", one)}, {}, {f32({2})});
    body->set_outputs({c, add->output(0)});
    auto g = std::make_shared<ir::Graph>();
    ir::Value* cond = g->add_input("cond", TensorType::of_static(DType::kBool, {}));
    ir::Value* y0 = g->add_input("y0", f32({2}));
    ir::Node* loop = g->add_node("Loop", {nullptr, cond, y0}, {{"body", ir::GraphAttr(body)}}, {f32({2})}, {"y"},
                                 "forever");
    g->set_outputs({loop->output(0)});
    ControlFlowLowering l = lower_control_flow(*g, {{}, {2}}, ctx());
    vm::VirtualMachine machine(l.program);
    Tensor t(DType::kBool, {});
    t.set_i64(0, 1);
    std::atomic<bool> terminate{false};
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        terminate = true;
    });
    std::vector<Tensor> got;
    Status st = machine.run({t, Tensor(DType::kFloat32, {2})}, got, &terminate);
    stopper.join();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kCancelled);
    EXPECT_NE(st.message().find("forever"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("terminated"), std::string::npos) << st.message();
    // The same machine runs a terminating loop afterwards (its flag is per run).
    t.set_i64(0, 0);
    ASSERT_TRUE(machine.run({t, Tensor(DType::kFloat32, {2})}, got).ok());
}

// One program per set of input shapes, at most max_programs held: a dropped one is lowered again.
TEST_F(VmTest, ModelKeepsBoundedProgramsPerShape) {
    VmModel model(affine_loop(4), ctx(), /*max_programs=*/1);
    for (int64_t n : {4, 3, 4}) {
        Tensor y0(DType::kFloat32, {n}), w(DType::kFloat32, {n});
        for (int64_t k = 0; k < n; ++k) w.set_f64(k, 2.0);
        std::vector<Tensor> out = VmModel::run(model.machine({i64_scalar(3), y0, w}), {i64_scalar(3), y0, w});
        ASSERT_EQ(out[0].shape(), (Shape{n}));
        EXPECT_EQ(out[0].get_f64(n - 1), 7.0);  // 0 -> 1 -> 3 -> 7
        EXPECT_EQ(out[1].shape(), (Shape{3, n}));
    }
}

}  // namespace
}  // namespace kiln::compiler
