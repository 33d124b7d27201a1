// A kernel's stage of the output's shape that the output reads only at its own index is written
// into the output's buffer (lower_group.cc, store_stage_in_output): Softmax's exp(x - max) needs
// no temporary of the scores' size, which a symbolic kernel allocated on every call. The values
// themselves are checked against a double reference by the Softmax tests of
// symbolic_session_test.cc and the op harness; here, what the lowered kernel allocates.
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
        case tir::StmtKind::kStore: break;
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

}  // namespace
}  // namespace kiln::compiler
