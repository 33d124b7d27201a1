// verify_graph accepts well-formed graphs and names the node for each kind of breakage.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "ir/parser.h"
#include "support/error.h"

namespace kiln::ir {
namespace {

TensorType f32(std::vector<Dim> s) { return TensorType(DType::kFloat32, std::move(s)); }

void expect_invalid(const Graph& g, const std::string& substr) {
    try {
        verify_graph(g);
        FAIL() << "expected verify_graph to fail with '" << substr << "'";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(e.message().find(substr), std::string::npos) << e.message();
    }
}

TEST(Verifier, AcceptsParsedGraph) {
    Graph g = parse_graph(R"(
graph main(%x: f32[N,4]) {
  const %c: f32[4] = [1, 2, 3, 4]
  %y = Add(%x, %c) : f32[N,4] # name="add"
  %z, %w = Split(%y) : f32[N,2], f32[N,2]
  return %z, %w, %x, %c
})");
    verify_graph(g);
}

TEST(Verifier, DuplicateNames) {
    Graph g;
    Value* x = g.add_input("x", f32({1}));
    Node* n = g.add_node("Relu", {x}, {}, {f32({1})}, {"y"}, "relu1");
    n->output(0)->set_name("x");
    expect_invalid(g, "'x'");
    expect_invalid(g, "relu1");
}

TEST(Verifier, TopologicalOrder) {
    Graph g;
    Value* x = g.add_input("x", f32({1}));
    Node* a = g.add_node("Relu", {x}, {}, {f32({1})}, {"a"}, "first");
    Node* b = g.add_node("Neg", {x}, {}, {f32({1})}, {"b"}, "second");
    a->set_input(0, b->output(0));
    expect_invalid(g, "node 'first' (Relu)");
    expect_invalid(g, "topological");
    g.topo_sort();
    verify_graph(g);
}

TEST(Verifier, ValueFromAnotherGraph) {
    Graph other;
    Value* foreign = other.add_input("foreign", f32({1}));
    Graph g;
    Value* x = g.add_input("x", f32({1}));
    Node* n = g.add_node("Add", {x, x}, {}, {f32({1})}, {"y"}, "add");
    n->set_input(1, foreign);
    expect_invalid(g, "not defined");
}

TEST(Verifier, OutputsDefined) {
    Graph other;
    Value* foreign = other.add_input("foreign", f32({1}));
    Graph g;
    g.add_input("x", f32({1}));
    g.add_output(foreign);
    expect_invalid(g, "output 0 'foreign'");
}

TEST(Verifier, EmptyGraphIsValid) {
    Graph g;
    verify_graph(g);
}

}  // namespace
}  // namespace kiln::ir
