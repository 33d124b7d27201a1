// Numerical gradient checks for ops' gradient entries (OpDef::gradient): the analytic gradient
// that autodiff::differentiate builds, compiled and run, against central differences of the
// forward graph.
//
// check_op_gradient(op, inputs, attrs, opts) builds a one-node graph of `op` whose
// differentiated inputs are graph inputs and whose other inputs are constants (integer inputs
// and the op's value inputs, like Reshape's shape, always are), and a scalar loss
//     loss = sum_k ReduceSum(output_k * R_k)
// over the node's floating-point outputs, with fixed random weights R_k (so every output
// element counts with its own weight: a gradient that permutes or mixes elements fails). It
// differentiates the loss, compiles both the gradient graph and the forward graph with
// compiler::compile (generated kernels; oneDNN where the compiler picks it, f32 only), and
// compares each gradient element with (loss(x + eps e_i) - loss(x - eps e_i)) / (2 eps),
// where the forward executable runs twice per element: keep inputs small (tens of elements).
//
// dtype: use float64 inputs (1e-6 steps, tight tolerances). Every family probed compiles and
// runs in f64 with generated kernels (forward agreeing with f32 to < 5e-7): the elementwise ops,
// MatMul/Gemm, Reduce*, Conv, MaxPool/AveragePool/GlobalAveragePool, BatchNormalization,
// Softmax/LogSoftmax, LayerNormalization, SoftmaxCrossEntropyLoss/NegativeLogLikelihoodLoss,
// Gather, Transpose, Concat, Slice, Expand, Reshape, Dropout (inference). oneDNN takes f32 only,
// so f64 never reaches it; test the f32 path with eps ~1e-2 and rtol/atol ~1e-2.
// Not for random ops (a Dropout mask drawn afresh per run): the forward must be deterministic
// across the 2n runs; ops with kinks (Relu, Clip, max) need inputs away from them (eps 1e-6).
// check_graph_gradient does the same for any graph (its graph inputs are differentiated).
// Also: random_tensor (seeded uniform), int64_tensor, float_tensor, CompiledGraph / run_graph
// (compile and run an ir::Graph in-process), InterpretedGraph (the graph interpreter, for If/Loop/Scan) and weighted_sum_loss for tests that build graphs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "autodiff/differentiate.h"
#include "compiler/compile.h"
#include "compiler/graph_interpreter.h"
#include "ir/graph.h"
#include "op/registry.h"
#include "pass/rewrite.h"
#include "pass/verify_typed.h"
#include "runtime/caching_allocator.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln::testing {

struct GradCheckOptions {
    double rtol = 1e-4, atol = 1e-6, eps = 1e-6;
    /// Input indices to differentiate; empty: every float input that is not a constant.
    std::vector<int> wrt;
    /// Inputs made constants (initializers). Integer inputs and the op's value inputs always are.
    std::vector<int> constant_inputs;
    /// The op node's output count (outputs beyond the first feed the loss when floating-point).
    int num_outputs = 1;
    /// Outputs that feed the loss; empty: every floating-point output.
    std::vector<int> loss_outputs;
    /// Seed of the loss weights R_k.
    uint64_t seed = 1;
    /// How both graphs compile (e.g. compile.opt_level = 0 to check unfused kernels).
    compiler::CompileOptions compile;
    /// Run both graphs in the graph interpreter instead (graphs with If/Loop/Scan regions,
    /// which compile() does not take); the typed-graph verifier is skipped then (a Loop's
    /// stacked outputs are typed by hand with the trip count the test knows).
    bool interpret = false;
};

/// A tensor of `shape` with elements uniform in [lo, hi), from `seed`.
inline Tensor random_tensor(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 0,
                            DType dtype = DType::kFloat64) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
    std::uniform_real_distribution<double> dist(lo, hi);
    Tensor t(dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dist(rng));
    return t;
}

/// A tensor holding `values` (row-major) of `shape` and `dtype`.
inline Tensor float_tensor(const Shape& shape, const std::vector<double>& values, DType dtype = DType::kFloat64) {
    Tensor t(dtype, shape);
    KILN_ICHECK(static_cast<int64_t>(values.size()) == t.numel()) << "float_tensor: " << values.size() << " values for " << shape_str(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, values[static_cast<size_t>(i)]);
    return t;
}

/// An int64 tensor holding `values`; 1-D unless `shape` is given.
inline Tensor int64_tensor(const std::vector<int64_t>& values, Shape shape = {}) {
    if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
    if (shape.empty() && values.size() == 1) shape = {1};
    Tensor t(DType::kInt64, shape);
    KILN_ICHECK(static_cast<int64_t>(values.size()) == t.numel()) << "int64_tensor: " << values.size() << " values for " << shape_str(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, values[static_cast<size_t>(i)]);
    return t;
}

/// An int64 tensor of `shape` with elements uniform in [lo, hi], from `seed`.
inline Tensor random_int64_tensor(const Shape& shape, int64_t lo, int64_t hi, uint64_t seed = 0) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 777);
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    Tensor t(DType::kInt64, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, dist(rng));
    return t;
}

/// A compiled graph that runs in-process (sequential executor, 1 thread).
class CompiledGraph {
public:
    /// Compiles `g` (in place: the pass pipeline rewrites it).
    explicit CompiledGraph(ir::Graph& g, compiler::CompileOptions opts = {}) {
        model_ = compiler::compile(g, opts);
        exec_ = std::make_unique<runtime::SequentialExecutor>(model_.executable, &pool_, alloc_.get());
    }
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
        std::vector<Tensor> outs;
        Status st = exec_->run(inputs, outs);
        KILN_CHECK(st.ok(), kInternal) << "running the compiled test graph: " << st.message();
        return outs;
    }
    const compiler::CompiledModel& model() const { return model_; }

private:
    compiler::CompiledModel model_;
    runtime::ThreadPool pool_{1};
    std::shared_ptr<runtime::CachingAllocator> alloc_ = runtime::make_session_allocator(0);
    std::unique_ptr<runtime::SequentialExecutor> exec_;
};

/// A graph run in the graph interpreter (regions: If, Loop, Scan), in-process, 1 thread.
class InterpretedGraph {
public:
    explicit InterpretedGraph(ir::Graph&& g)
        : interp_(std::make_shared<ir::Graph>(std::move(g)), &pool_, alloc_.get()) {}
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
        std::vector<Datum> ins(inputs.begin(), inputs.end());
        std::vector<Tensor> outs;
        for (const Datum& d : interp_.run(ins)) outs.push_back(d.tensor("interpreted test graph output"));
        return outs;
    }

private:
    runtime::ThreadPool pool_{1};
    std::shared_ptr<runtime::CachingAllocator> alloc_ = runtime::make_session_allocator(0);
    compiler::GraphInterpreter interp_;
};

/// Runs `g` compiled or interpreted (GradCheckOptions::interpret); takes the graph over.
class TestGraph {
public:
    TestGraph(ir::Graph& g, const GradCheckOptions& o) {
        if (o.interpret) interpreted_ = std::make_unique<InterpretedGraph>(std::move(g));
        else compiled_ = std::make_unique<CompiledGraph>(g, o.compile);
    }
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
        return interpreted_ ? interpreted_->run(inputs) : compiled_->run(inputs);
    }

private:
    std::unique_ptr<InterpretedGraph> interpreted_;
    std::unique_ptr<CompiledGraph> compiled_;
};

/// Compiles `g` and runs it once on `inputs` (graph-input order).
inline std::vector<Tensor> run_graph(ir::Graph& g, const std::vector<Tensor>& inputs) {
    CompiledGraph c(g);
    return c.run(inputs);
}

/// A fixed random weight tensor per loss term.
inline ir::Value* loss_weights(ir::Graph& g, const ir::TensorType& t, uint64_t seed) {
    return g.add_constant(g.fresh_name("R"), random_tensor(t.static_shape(), 0.5, 1.5, seed, t.dtype));
}

/// loss = sum_k ReduceSum(v_k * R_k): a scalar weighting every element of every v_k differently.
inline ir::Value* weighted_sum_loss(ir::Graph& g, const std::vector<ir::Value*>& vs, uint64_t seed) {
    ir::Value* loss = nullptr;
    for (size_t k = 0; k < vs.size(); ++k) {
        ir::Value* v = vs[k];
        ir::Value* r = loss_weights(g, v->type(), seed * 1000 + k);
        ir::Value* prod = pass::add_inferred_node(g, "Mul", {v, r})->output(0);
        ir::Value* s = pass::add_inferred_node(g, "ReduceSum", {prod}, {{"keepdims", int64_t{0}}})->output(0);
        loss = loss ? pass::add_inferred_node(g, "Add", {loss, s})->output(0) : s;
    }
    return loss;
}

namespace detail {

inline bool is_float(const Tensor& t) { return dtype_is_float(t.dtype()); }

/// The inputs check_op_gradient differentiates.
inline std::vector<int> chosen_wrt(const std::string& op, const std::vector<Tensor>& inputs, const GradCheckOptions& o) {
    const op::OpDef* def = op::OpRegistry::global().find(op);
    KILN_CHECK(def, kInvalidArgument) << "check_op_gradient: unknown op '" << op << "'";
    std::set<int> fixed(o.constant_inputs.begin(), o.constant_inputs.end());
    fixed.insert(def->value_inputs.begin(), def->value_inputs.end());
    std::vector<int> wrt = o.wrt;
    if (wrt.empty())
        for (int i = 0; i < static_cast<int>(inputs.size()); ++i)
            if (inputs[i].defined() && is_float(inputs[i]) && !fixed.count(i)) wrt.push_back(i);
    for (int i : wrt) {
        KILN_CHECK(i >= 0 && i < static_cast<int>(inputs.size()) && is_float(inputs[i]) && !fixed.count(i), kInvalidArgument)
            << "check_op_gradient(" << op << "): input " << i << " cannot be differentiated (not a float input, or a constant)";
    }
    return wrt;
}

/// The op node with `wrt` inputs as graph inputs (others constants; an undefined Tensor is an
/// omitted optional input), and the loss over its float outputs.
inline ir::Value* build(ir::Graph& g, const std::string& op, const std::vector<Tensor>& inputs,
                        const ir::AttrMap& attrs, const std::vector<int>& wrt, const GradCheckOptions& o) {
    std::vector<ir::Value*> ins(inputs.size(), nullptr);
    for (int i : wrt)
        ins[i] = g.add_input("x" + std::to_string(i), ir::TensorType::of_static(inputs[i].dtype(), inputs[i].shape()));
    for (size_t i = 0; i < inputs.size(); ++i)
        if (!ins[i] && inputs[i].defined() && !(inputs[i].numel() == 0 && inputs[i].shape().empty()))
            ins[i] = g.add_constant("c" + std::to_string(i), inputs[i]);
    while (!ins.empty() && !ins.back()) ins.pop_back();
    ir::Node* n = pass::add_inferred_node(g, op, ins, attrs, o.num_outputs, "y");
    n->set_name("node");
    std::vector<ir::Value*> outs;
    for (size_t k = 0; k < n->num_outputs(); ++k) {
        ir::Value* v = n->output(k);
        const bool chosen = o.loss_outputs.empty() || std::count(o.loss_outputs.begin(), o.loss_outputs.end(), static_cast<int>(k));
        if (chosen && dtype_is_float(v->type().dtype)) outs.push_back(v);
    }
    KILN_CHECK(!outs.empty(), kInvalidArgument) << "check_op_gradient(" << op << "): no floating-point output";
    return weighted_sum_loss(g, outs, o.seed);
}

inline std::string describe(const std::string& op, int input, const Tensor& t, int64_t i) {
    std::string idx;
    int64_t rest = i;
    const Shape& s = t.shape();
    std::vector<int64_t> coord(s.size());
    for (size_t d = s.size(); d-- > 0;) {
        coord[d] = s[d] ? rest % s[d] : 0;
        rest = s[d] ? rest / s[d] : 0;
    }
    for (size_t d = 0; d < coord.size(); ++d) idx += (d ? "," : "") + std::to_string(coord[d]);
    return op + " input " + std::to_string(input) + " element " + std::to_string(i) + " [" + idx + "] of " + shape_str(s);
}

}  // namespace detail

/// Builds a graph whose graph inputs are the values to differentiate and returns its scalar
/// loss. Called twice (gradient and forward graphs): it must build the same graph each time.
using LossGraphFn = std::function<ir::Value*(ir::Graph& g)>;

/// Checks d loss / d (every graph input) of the graph `build` makes, fed `inputs` (graph-input
/// order), against central differences; `what` names the check in failures (`input_ids`: the
/// numbers failures give the inputs, default 0..n-1). opts.wrt, constant_inputs, num_outputs
/// and loss_outputs are not used here (weighted_sum_loss builds such a loss).
inline void check_graph_gradient(const std::string& what, const LossGraphFn& build, const std::vector<Tensor>& inputs,
                                 const GradCheckOptions& opts = {}, const std::vector<int>& input_ids = {}) {
    // The analytic gradients.
    ir::Graph bwd;
    ir::Value* loss = build(bwd);
    ASSERT_EQ(bwd.inputs().size(), inputs.size()) << what;
    autodiff::Gradients grads = autodiff::differentiate(bwd, loss, bwd.inputs());
    bwd.set_outputs(grads.grads);
    if (!opts.interpret) pass::verify_typed_graph(bwd);  // topological order, types matching inference
    std::vector<Tensor> analytic = TestGraph(bwd, opts).run(inputs);
    ASSERT_EQ(analytic.size(), inputs.size()) << what;

    // The numerical ones: the forward graph, run with each element moved by +-eps.
    ir::Graph fwd;
    fwd.set_outputs({build(fwd)});
    TestGraph forward(fwd, opts);
    int failures = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
        const Tensor& x = inputs[k];
        const int id = k < input_ids.size() ? input_ids[k] : static_cast<int>(k);
        ASSERT_EQ(analytic[k].shape(), x.shape()) << what << " input " << id;
        std::vector<Tensor> moved;
        for (const Tensor& f : inputs) moved.push_back(f.clone());
        for (int64_t i = 0; i < x.numel(); ++i) {
            const double x0 = x.get_f64(i);
            // The steps actually taken: in f32, x0 +- eps rounds.
            moved[k].set_f64(i, x0 + opts.eps);
            const double x_up = moved[k].get_f64(i);
            const double up = forward.run(moved).at(0).get_f64(0);
            moved[k].set_f64(i, x0 - opts.eps);
            const double x_down = moved[k].get_f64(i);
            const double down = forward.run(moved).at(0).get_f64(0);
            moved[k].set_f64(i, x0);
            const double numeric = (up - down) / (x_up - x_down);
            const double got = analytic[k].get_f64(i);
            const double tol = opts.atol + opts.rtol * std::abs(numeric);
            if (!(std::abs(got - numeric) <= tol)) {
                ADD_FAILURE() << detail::describe(what, id, x, i) << ": analytic " << got << ", numeric " << numeric
                              << " (|diff| " << std::abs(got - numeric) << " > tol " << tol << ")";
                if (++failures >= 10) return;
            }
        }
    }
}

/// Checks `op`'s gradient entry against central differences (see the file comment). An
/// undefined Tensor in `inputs` is an omitted optional input.
inline void check_op_gradient(const std::string& op, std::vector<Tensor> inputs, ir::AttrMap attrs,
                              GradCheckOptions opts = {}) {
    const std::vector<int> wrt = detail::chosen_wrt(op, inputs, opts);
    ASSERT_FALSE(wrt.empty()) << op << ": nothing to differentiate";
    std::vector<Tensor> feeds;
    for (int i : wrt) feeds.push_back(inputs[i]);
    LossGraphFn build = [&](ir::Graph& g) { return detail::build(g, op, inputs, attrs, wrt, opts); };
    check_graph_gradient(op, build, feeds, opts, wrt);
}

/// The one-direction form (JAX's check_vjp): for a random direction v over the differentiated
/// inputs, <gradient, v> against (loss(x + eps v) - loss(x - eps v)) / (2 eps). Two forward runs
/// whatever the inputs' size, so shapes can be realistic; a wrong element of the gradient shows
/// as a wrong sum unless its error is orthogonal to v (a random v makes that unlikely).
/// opts.rtol / atol apply to the sum.
inline void check_op_vjp(const std::string& op, std::vector<Tensor> inputs, ir::AttrMap attrs, GradCheckOptions opts = {}) {
    const std::vector<int> wrt = detail::chosen_wrt(op, inputs, opts);
    ASSERT_FALSE(wrt.empty()) << op << ": nothing to differentiate";
    std::vector<Tensor> feeds;
    for (int i : wrt) feeds.push_back(inputs[i]);
    LossGraphFn build = [&](ir::Graph& g) { return detail::build(g, op, inputs, attrs, wrt, opts); };
    ir::Graph bwd;
    ir::Value* loss = build(bwd);
    autodiff::Gradients grads = autodiff::differentiate(bwd, loss, bwd.inputs());
    bwd.set_outputs(grads.grads);
    if (!opts.interpret) pass::verify_typed_graph(bwd);
    std::vector<Tensor> analytic = TestGraph(bwd, opts).run(feeds);
    ASSERT_EQ(analytic.size(), feeds.size()) << op;
    ir::Graph fwd;
    fwd.set_outputs({build(fwd)});
    TestGraph forward(fwd, opts);
    std::vector<Tensor> up, down;
    double along = 0;  // <gradient, v>
    for (size_t k = 0; k < feeds.size(); ++k) {
        ASSERT_EQ(analytic[k].shape(), feeds[k].shape()) << op << " input " << wrt[k];
        const Tensor v = random_tensor(feeds[k].shape(), -1, 1, opts.seed * 7919 + k, DType::kFloat64);
        up.push_back(feeds[k].clone());
        down.push_back(feeds[k].clone());
        for (int64_t i = 0; i < v.numel(); ++i) {
            up[k].set_f64(i, feeds[k].get_f64(i) + opts.eps * v.get_f64(i));
            down[k].set_f64(i, feeds[k].get_f64(i) - opts.eps * v.get_f64(i));
            along += analytic[k].get_f64(i) * v.get_f64(i);
        }
    }
    const double numeric = (forward.run(up).at(0).get_f64(0) - forward.run(down).at(0).get_f64(0)) / (2 * opts.eps);
    EXPECT_NEAR(along, numeric, opts.atol + opts.rtol * std::abs(numeric))
        << op << ": <gradient, v> " << along << " against the central difference along v " << numeric;
}

}  // namespace kiln::testing
