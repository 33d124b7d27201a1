// A kernel's stage of the output's shape that the output reads only at its own index is written
// into the output's buffer (lower_group.cc, store_stage_in_output): Softmax's exp(x - max) needs
// no temporary of the scores' size, which a symbolic kernel allocated on every call. And the
// inputs a lowered kernel may be computed in place of (LoweredKernel::inplace_inputs): Softmax's
// scores, elementwise inputs, static or symbolic; not an input read after the output's buffer
// is first written. The values are checked against double references by the Softmax tests of
// symbolic_session_test.cc, the op harness and the models against ONNX Runtime; here, what the
// lowered kernel allocates and which inputs it offers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/lower_group.h"
#include "ir/graph.h"
#include "tir/stmt.h"

namespace kiln::compiler {
namespace {

ir::TensorType f32(const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim(v));
    return ir::TensorType(DType::kFloat32, d);
}

/// [batch, 12, seq, seq] with batch and seq symbolic.
ir::TensorType scores_type() {
    return ir::TensorType(DType::kFloat32, {ir::Dim::sym("batch"), ir::Dim(12), ir::Dim::sym("seq"), ir::Dim::sym("seq")});
}

/// The unit whose first node is `op` in a graph of one node `op` over inputs of `type`, lowered
/// with params_may_alias (symbolic when the type is).
LoweredKernel lower_one(const std::string& op, int inputs, const ir::TensorType& type, bool preemptible = false) {
    ir::Graph g;
    std::vector<ir::Value*> ins;
    for (int i = 0; i < inputs; ++i) ins.push_back(g.add_input("x" + std::to_string(i), type));
    ir::AttrMap attrs;
    if (op == "Softmax") attrs["axis"] = ir::Attr(int64_t{-1});
    g.add_output(g.add_node(op, ins, attrs, {type}, {"y"}, "n")->output(0));
    SymbolicDims sym;
    for (const ir::Dim& d : type.shape)
        if (!d.is_static()) sym.add(d.symbol);
    for (const KernelUnit& u : partition_kernels(g))
        if (u.nodes.front()->op() == op)
            return lower_unit(u, true, {}, type.is_static() ? nullptr : &sym, 1, preemptible);
    ADD_FAILURE() << "no " << op << " unit";
    return {};
}

/// The names of the kernel-local buffers `s` allocates (register tiles excluded).
void allocations(const tir::Stmt& s, std::vector<std::string>& out) {
    if (!s) return;
    switch (s->kind) {
        case tir::StmtKind::kFor: allocations(static_cast<const tir::ForNode&>(*s).body, out); break;
        case tir::StmtKind::kSeq:
            for (const tir::Stmt& c : static_cast<const tir::SeqNode&>(*s).stmts) allocations(c, out);
            break;
        case tir::StmtKind::kIf: {
            const auto& n = static_cast<const tir::IfNode&>(*s);
            allocations(n.then_case, out);
            allocations(n.else_case, out);
            break;
        }
        case tir::StmtKind::kAllocate: {
            const auto& n = static_cast<const tir::AllocateNode&>(*s);
            if (!n.buffer->local) out.push_back(n.buffer->name);
            allocations(n.body, out);
            break;
        }
        case tir::StmtKind::kStore:
        case tir::StmtKind::kPrefetch: break;
    }
}

std::vector<std::string> softmax_allocations(const Shape& shape, int64_t axis) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", f32(shape));
    ir::Node* n = g.add_node("Softmax", {x}, {{"axis", ir::Attr(axis)}}, {f32(shape)}, {"y"}, "probs");
    g.add_output(n->output(0));
    optimize_graph(g, CompileOptions{});
    for (const KernelUnit& u : partition_kernels(g)) {
        if (u.nodes.front()->op() != "Softmax") continue;
        std::vector<std::string> out;
        allocations(lower_unit(u, false).func.body, out);
        return out;
    }
    ADD_FAILURE() << "no Softmax unit";
    return {};
}

bool has_exp(const std::vector<std::string>& names) {
    for (const std::string& n : names)
        if (n.find("_exp") != std::string::npos) return true;
    return false;
}

TEST(StoreInOutput, SoftmaxWritesItsExponentialsIntoTheOutput) {
    // The attention scores' rows (lane reductions), a short row (plain reductions), a leading axis.
    for (auto [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{2, 12, 40, 40}, -1}, {{4, 5}, -1}, {{3, 6, 20}, 1}}) {
        const std::vector<std::string> a = softmax_allocations(shape, axis);
        EXPECT_FALSE(has_exp(a)) << "shape " << shape_str(shape) << " axis " << axis;
        EXPECT_FALSE(a.empty()) << "the row max and sum stay kernel-local buffers";
    }
}

TEST(StoreInOutput, SoftmaxAndElementwiseKernelsOfferTheirInputsForInPlace) {
    const ir::TensorType stat = f32({2, 12, 40, 40});
    for (const ir::TensorType& t : {stat, scores_type()}) {
        const LoweredKernel soft = lower_one("Softmax", 1, t);
        EXPECT_EQ(soft.inplace_inputs, std::vector<int>{0}) << t.str();
        EXPECT_TRUE(soft.func.params_may_alias);
        EXPECT_EQ(soft.source.find("restrict in0"), std::string::npos) << "an in-place kernel drops restrict";
        EXPECT_EQ(lower_one("Add", 2, t).inplace_inputs, (std::vector<int>{0, 1})) << t.str();
        // A preemptible compile: one-stage kernels only (a Softmax cut mid-way could not restart).
        EXPECT_TRUE(lower_one("Softmax", 1, t, true).inplace_inputs.empty()) << t.str();
        EXPECT_EQ(lower_one("Add", 2, t, true).inplace_inputs, (std::vector<int>{0, 1})) << t.str();
    }
    // Not asked: none offered, restrict kept.
    ir::Graph g;
    ir::Value* x = g.add_input("x", stat);
    g.add_output(g.add_node("Softmax", {x}, {{"axis", ir::Attr(int64_t{-1})}}, {stat}, {"y"}, "n")->output(0));
    const LoweredKernel k = lower_unit(partition_kernels(g).front(), false);
    EXPECT_TRUE(k.inplace_inputs.empty());
    EXPECT_FALSE(k.func.params_may_alias);
}

TEST(StoreInOutput, AnInputReadAfterTheOutputIsWrittenIsNotOffered) {
    // y = a·b + c, fused: the product is stored in y's buffer and the epilogue then adds c, so c
    // (read after y's buffer is written) cannot share it; a and b are read at other indices.
    const ir::TensorType sq = f32({64, 64});
    ir::Graph g;
    ir::Value* a = g.add_input("a", sq);
    ir::Value* b = g.add_input("b", sq);
    ir::Value* c = g.add_input("c", sq);
    ir::Value* p = g.add_node("MatMul", {a, b}, {}, {sq}, {"p"}, "mm")->output(0);
    g.add_output(g.add_node("Add", {p, c}, {}, {sq}, {"y"}, "add")->output(0));
    optimize_graph(g, CompileOptions{});
    bool fused = false;
    for (const KernelUnit& u : partition_kernels(g)) {
        if (u.nodes.size() < 2) continue;
        fused = true;
        EXPECT_TRUE(lower_unit(u, true).inplace_inputs.empty()) << u.ops();
    }
    EXPECT_TRUE(fused) << "the Add is expected to fuse into the product's kernel";
}

}  // namespace
}  // namespace kiln::compiler
