// GraphInterpreter: which graphs need it, and running graphs node by node — tir-interpreted
// small nodes, compiled large nodes, data-dependent value inputs, sub-graphs reading outer-scope
// values. References are naive loops written here.
#include "compiler/graph_interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "runtime/caching_allocator.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

using ir::TensorType;

TensorType f32(Shape s) { return TensorType::of_static(DType::kFloat32, s); }

Tensor filled(Shape s, float start, float step) {
    Tensor t(DType::kFloat32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = start + step * static_cast<float>(i);
    return t;
}

class GraphInterpreterTest : public ::testing::Test {
protected:
    std::vector<Datum> run(std::shared_ptr<ir::Graph> g, const std::vector<Datum>& inputs) {
        interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
        return interp_->run(inputs);
    }
    runtime::ThreadPool pool_{1};
    std::shared_ptr<runtime::CachingAllocator> alloc_ = runtime::make_session_allocator(0);
    std::unique_ptr<GraphInterpreter> interp_;
};

// x: f32[n] -> Range(0, ReduceSum(x) as i64, 1): the Range length is run-time data.
std::shared_ptr<ir::Graph> data_dependent_range(int64_t n) {
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({n}));
    ir::Node* sum = g->add_node("ReduceSum", {x}, {{"keepdims", int64_t{0}}}, {f32({})});
    ir::Node* cast = g->add_node("Cast", {sum->output(0)}, {{"to", int64_t{7}}},
                                 {TensorType::of_static(DType::kInt64, {})});
    Tensor zero(DType::kInt64, {}), one(DType::kInt64, {});
    one.set_i64(0, 1);
    ir::Node* range = g->add_node("Range", {g->add_constant("start", zero), cast->output(0), g->add_constant("delta", one)},
                                  {}, {TensorType(DType::kInt64, {ir::Dim::sym("?")})});
    g->add_output(range->output(0));
    return g;
}

TEST(InterpreterReason, PlainGraphsCompile) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32({4}));
    ir::Node* s = g.add_node("Shape", {x}, {}, {TensorType::of_static(DType::kInt64, {1})});
    ir::Node* r = g.add_node("Reshape", {x, s->output(0)}, {}, {f32({4})});
    g.add_output(r->output(0));
    // The Reshape target depends on x's shape only, which compile() knows.
    EXPECT_EQ(interpreter_reason(g), "");
}

TEST(InterpreterReason, DataDependentValueInputsStringsAndSequences) {
    EXPECT_NE(interpreter_reason(*data_dependent_range(3)).find("computed from run-time data"), std::string::npos);

    ir::Graph s;
    s.add_output(s.add_input("names", TensorType(DType::kString, {2})));
    EXPECT_NE(interpreter_reason(s).find("graph input 'names'"), std::string::npos);

    ir::Graph q;
    TensorType seq(DType::kFloat32, {});
    seq.kind = ir::TypeKind::kSequence;
    q.add_output(q.add_input("xs", seq));
    EXPECT_NE(interpreter_reason(q).find("seq<f32[]>"), std::string::npos);

    // A graph input feeding a value input directly is specialized on by the session instead.
    ir::Graph d;
    ir::Value* shape = d.add_input("shape", TensorType::of_static(DType::kInt64, {1}));
    ir::Value* x = d.add_input("x", f32({4}));
    d.add_output(d.add_node("Reshape", {x, shape}, {}, {f32({4})})->output(0));
    EXPECT_EQ(interpreter_reason(d, {"shape"}), "");
}

TEST_F(GraphInterpreterTest, RunsARangeOfDataDependentLength) {
    auto g = data_dependent_range(3);
    std::vector<Datum> out = run(g, {Datum(filled({3}, 1.0f, 1.0f))});  // sum = 1 + 2 + 3 = 6
    ASSERT_EQ(out.size(), 1u);
    const Tensor& r = out[0].tensor();
    ASSERT_EQ(r.shape(), Shape({6}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(r.get_i64(i), i);
    // A different sum gives a different length on the next run.
    out = run(g, {Datum(filled({3}, 0.0f, 0.5f))});  // 0 + 0.5 + 1 = 1.5 -> 1
    EXPECT_EQ(out[0].tensor().shape(), Shape({1}));
    EXPECT_EQ(interp_->counts().compiled, 0);  // every node was small: tir-interpreted
}

TEST_F(GraphInterpreterTest, CompilesLargeNodesOnceAndReusesThem) {
    const int64_t n = 3 * kInterpretElements;
    auto g = std::make_shared<ir::Graph>();
    ir::Value* a = g->add_input("a", f32({n}));
    ir::Value* b = g->add_input("b", f32({n}));
    ir::Node* add = g->add_node("Add", {a, b}, {}, {f32({n})});
    ir::Node* mul = g->add_node("Mul", {add->output(0), b}, {}, {f32({n})});
    g->add_output(mul->output(0));
    interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
    for (int round = 0; round < 2; ++round) {
        Tensor ta = filled({n}, 1.0f + round, 0.001f), tb = filled({n}, -2.0f, 0.0005f);
        std::vector<Datum> out = interp_->run({Datum(ta), Datum(tb)});
        const Tensor& y = out[0].tensor();
        for (int64_t i = 0; i < n; i += 997) {
            float want = (ta.data_as<float>()[i] + tb.data_as<float>()[i]) * tb.data_as<float>()[i];
            ASSERT_FLOAT_EQ(y.data_as<float>()[i], want) << "element " << i;
        }
    }
    EXPECT_EQ(interp_->counts().compiled, 4);  // two nodes, two runs
    EXPECT_EQ(interp_->counts().compiles, 2);  // the second run hits the cache
}

TEST_F(GraphInterpreterTest, CompilesNodesOfMuchWorkAtOnce) {
    // A 128x128 MatMul holds few elements but does 2*128^3 flops, past kInterpretWork: compiled on
    // its first run (the tir interpreter's cost per flop made a silero VAD chunk 100x slower).
    const int64_t n = 128;
    static_assert(n * n <= kInterpretElements && 2.0 * n * n * n > kInterpretWork);
    auto g = std::make_shared<ir::Graph>();
    ir::Value* a = g->add_input("a", f32({n, n}));
    ir::Value* b = g->add_input("b", f32({n, n}));
    g->add_output(g->add_node("MatMul", {a, b}, {}, {f32({n, n})})->output(0));
    Tensor ta = filled({n, n}, -1.0f, 0.0001f), tb = filled({n, n}, 0.5f, -0.00007f);
    std::vector<Datum> out = run(g, {Datum(ta), Datum(tb)});
    const float* y = out[0].tensor().data_as<float>();
    for (int64_t i = 0; i < n; i += 7)
        for (int64_t j = 0; j < n; j += 5) {
            double want = 0;
            for (int64_t k = 0; k < n; ++k)
                want += double(ta.data_as<float>()[i * n + k]) * double(tb.data_as<float>()[k * n + j]);
            ASSERT_NEAR(y[i * n + j], want, 1e-3) << i << "," << j;
        }
    EXPECT_EQ(interp_->counts().compiled, 1);
    EXPECT_EQ(interp_->counts().interpreted, 0);
}

TEST_F(GraphInterpreterTest, MemoizesNodesOfFixedInputs) {
    // m = c1 * c2 reads constants only: computed on the first run, reused after; y = x + m is not.
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({4}));
    ir::Value* c1 = g->add_constant("c1", filled({4}, 1.0f, 1.0f));
    ir::Value* c2 = g->add_constant("c2", filled({4}, 0.5f, 0.0f));
    ir::Node* m = g->add_node("Mul", {c1, c2}, {}, {f32({4})});
    g->add_output(g->add_node("Add", {x, m->output(0)}, {}, {f32({4})})->output(0));
    interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
    for (int round = 0; round < 3; ++round) {
        Tensor tx = filled({4}, 10.0f * round, 1.0f);
        std::vector<Datum> out = interp_->run({Datum(tx)});
        for (int64_t i = 0; i < 4; ++i)
            EXPECT_FLOAT_EQ(out[0].tensor().data_as<float>()[i], tx.data_as<float>()[i] + 0.5f * (1.0f + i)) << round;
    }
    EXPECT_EQ(interp_->counts().reused, 2);       // Mul, runs 2 and 3
    EXPECT_EQ(interp_->counts().interpreted, 4);  // Mul once, Add three times
}

TEST_F(GraphInterpreterTest, NodesThatRunOnceAreNotCompiled) {
    // 100k elements of constants (past kInterpretElements): memoized, so interpreted, not compiled.
    const int64_t n = 100000;
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({n}));
    ir::Node* m = g->add_node("Mul", {g->add_constant("c1", filled({n}, 0.0f, 1.0f)), g->add_constant("c2", filled({n}, 2.0f, 0.0f))},
                              {}, {f32({n})});
    g->add_output(g->add_node("Add", {x, m->output(0)}, {}, {f32({n})})->output(0));
    interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
    for (int round = 0; round < 2; ++round) {
        std::vector<Datum> out = interp_->run({Datum(filled({n}, 1.0f, 0.0f))});
        for (int64_t i = 0; i < n; i += 997) ASSERT_FLOAT_EQ(out[0].tensor().data_as<float>()[i], 1.0f + 2.0f * i);
    }
    EXPECT_EQ(interp_->counts().compiles, 1);  // the Add only
    EXPECT_EQ(interp_->counts().reused, 1);
}

TEST_F(GraphInterpreterTest, ReshapeLikeNodesAreViews) {
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({2, 6}));
    Tensor shape(DType::kInt64, {2});
    shape.set_i64(0, 3);
    shape.set_i64(1, 4);
    ir::Node* r = g->add_node("Reshape", {x, g->add_constant("shape", shape)}, {}, {f32({3, 4})});
    g->add_output(r->output(0));
    Tensor tx = filled({2, 6}, 0.0f, 1.0f);
    std::vector<Datum> out = run(g, {Datum(tx)});
    EXPECT_EQ(out[0].tensor().shape(), Shape({3, 4}));
    EXPECT_EQ(out[0].tensor().data(), tx.data());  // no copy
    EXPECT_EQ(interp_->counts().views, 1);
    EXPECT_EQ(interp_->counts().interpreted + interp_->counts().compiled, 0);
}

TEST_F(GraphInterpreterTest, CompilesSmallNodesOnceHot) {
    // A 512-element Relu: tir-interpreted for its first kHotRuns - 1 runs (no compiler call on a
    // first run), then compiled.
    auto g = std::make_shared<ir::Graph>();
    ir::Value* x = g->add_input("x", f32({512}));
    g->add_output(g->add_node("Relu", {x}, {}, {f32({512})})->output(0));
    interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
    const int runs = kHotRuns + 2;
    for (int round = 0; round < runs; ++round) {
        Tensor tx = filled({512}, -100.0f + round, 0.5f);
        std::vector<Datum> out = interp_->run({Datum(tx)});
        for (int64_t i = 0; i < 512; ++i)
            ASSERT_FLOAT_EQ(out[0].tensor().data_as<float>()[i], std::max(0.0f, tx.data_as<float>()[i])) << round;
    }
    EXPECT_EQ(interp_->counts().interpreted, kHotRuns - 1);
    EXPECT_EQ(interp_->counts().compiled, runs - (kHotRuns - 1));
    EXPECT_EQ(interp_->counts().compiles, 1);
}

TEST_F(GraphInterpreterTest, SubGraphNodesOfFixedOuterValuesAreMemoized) {
    // The branch squares an outer constant (fixed), then adds an outer input (not fixed).
    auto then_g = std::make_shared<ir::Graph>();
    then_g->name = "then";
    ir::Value* w = then_g->add_outer_input("w", f32({3}));
    ir::Value* x = then_g->add_outer_input("x", f32({3}));
    ir::Node* sq = then_g->add_node("Mul", {w, w}, {}, {f32({3})});
    then_g->add_output(then_g->add_node("Add", {sq->output(0), x}, {}, {f32({3})})->output(0));
    auto else_g = std::make_shared<ir::Graph>();
    else_g->name = "else";
    else_g->add_output(else_g->add_node("Neg", {else_g->add_outer_input("x", f32({3}))}, {}, {f32({3})})->output(0));
    auto g = std::make_shared<ir::Graph>();
    ir::Value* c = g->add_input("c", TensorType::of_static(DType::kBool, {}));
    g->add_input("x", f32({3}));
    g->add_constant("w", filled({3}, 1.0f, 1.0f));
    g->add_output(g->add_node("If", {c}, {{"then_branch", ir::GraphAttr(then_g)}, {"else_branch", ir::GraphAttr(else_g)}},
                              {f32({3})})->output(0));
    interp_ = std::make_unique<GraphInterpreter>(g, &pool_, alloc_.get());
    Tensor tc(DType::kBool, {});
    tc.set_i64(0, 1);
    for (int round = 0; round < 2; ++round) {
        Tensor tx = filled({3}, 5.0f * round, 1.0f);
        std::vector<Datum> out = interp_->run({Datum(tc), Datum(tx)});
        for (int64_t i = 0; i < 3; ++i)
            EXPECT_FLOAT_EQ(out[0].tensor().data_as<float>()[i], (1.0f + i) * (1.0f + i) + tx.data_as<float>()[i]);
    }
    EXPECT_EQ(interp_->counts().reused, 1);  // the Mul on the second run
}

// If(cond) { y = x * x } else { y = -x }, where x is computed in the outer graph and only the
// branches read it (by name, from the enclosing scope).
std::shared_ptr<ir::Graph> if_with_captured_value() {
    auto then_g = std::make_shared<ir::Graph>();
    then_g->name = "then";
    ir::Value* tx = then_g->add_outer_input("x2", f32({3}));
    then_g->add_output(then_g->add_node("Mul", {tx, tx}, {}, {f32({3})})->output(0));
    auto else_g = std::make_shared<ir::Graph>();
    else_g->name = "else";
    ir::Value* ex = else_g->add_outer_input("x2", f32({3}));
    else_g->add_output(else_g->add_node("Neg", {ex}, {}, {f32({3})})->output(0));

    auto g = std::make_shared<ir::Graph>();
    ir::Value* c = g->add_input("c", TensorType::of_static(DType::kBool, {}));
    ir::Value* x = g->add_input("x", f32({3}));
    ir::Node* twice = g->add_node("Add", {x, x}, {}, {f32({3})}, {"x2"});
    ir::Node* iff = g->add_node("If", {c}, {{"then_branch", ir::GraphAttr(then_g)}, {"else_branch", ir::GraphAttr(else_g)}},
                                {f32({3})});
    (void)twice;
    g->add_output(iff->output(0));
    return g;
}

TEST_F(GraphInterpreterTest, SubGraphsReadOuterValuesByName) {
    auto g = if_with_captured_value();
    Tensor x = filled({3}, -1.0f, 1.0f);  // -1, 0, 1 -> x2 = -2, 0, 2
    for (bool cond : {true, false}) {
        Tensor c(DType::kBool, {});
        c.set_i64(0, cond);
        std::vector<Datum> out = run(g, {Datum(c), Datum(x)});
        const Tensor& y = out[0].tensor();
        for (int64_t i = 0; i < 3; ++i) {
            double x2 = 2.0 * x.get_f64(i);
            EXPECT_DOUBLE_EQ(y.get_f64(i), cond ? x2 * x2 : -x2) << "cond " << cond << " element " << i;
        }
    }
}

TEST_F(GraphInterpreterTest, AnUndefinedOuterNameIsAnError) {
    auto sub = std::make_shared<ir::Graph>();
    sub->add_output(sub->add_outer_input("nowhere", f32({1})));
    auto g = std::make_shared<ir::Graph>();
    ir::Value* c = g->add_input("c", TensorType::of_static(DType::kBool, {}));
    g->add_output(g->add_node("If", {c}, {{"then_branch", ir::GraphAttr(sub)}, {"else_branch", ir::GraphAttr(sub)}},
                              {f32({1})})
                      ->output(0));
    Tensor t(DType::kBool, {});
    try {
        run(g, {Datum(t)});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(std::string(e.what()).find("'nowhere'"), std::string::npos) << e.what();
    }
}

TEST_F(GraphInterpreterTest, StringTensorsNeedAHostKernel) {
    auto g = std::make_shared<ir::Graph>();
    ir::Value* s = g->add_input("s", TensorType(DType::kString, {2}));
    g->add_output(g->add_node("Relu", {s}, {}, {TensorType(DType::kString, {2})})->output(0));
    Tensor t(DType::kString, {2});
    try {
        run(g, {Datum(t)});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("numeric tensors only"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kiln::compiler
