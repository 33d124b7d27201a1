// Graph construction and edits: user lists, replace_all_uses, erase_node, freeze_input,
// topo_sort, attribute accessors, names.
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ir/verifier.h"
#include "support/error.h"

namespace kiln::ir {
namespace {

TensorType f32(std::vector<Dim> s) { return TensorType(DType::kFloat32, std::move(s)); }

size_t count(const std::vector<Node*>& xs, const Node* n) {
    return std::count(xs.begin(), xs.end(), n);
}

TEST(Graph, ConstructionAndUsers) {
    Graph g;
    Value* x = g.add_input("x", f32({1, 4}));
    Tensor w(DType::kFloat32, {4});
    Value* c = g.add_constant("w", w);
    EXPECT_TRUE(x->is_graph_input());
    EXPECT_FALSE(x->is_constant());
    EXPECT_TRUE(c->is_constant());
    EXPECT_EQ(c->type(), TensorType::of_static(DType::kFloat32, {4}));
    Node* add = g.add_node("Add", {x, c}, {}, {f32({1, 4})}, {"y"}, "add1");
    Node* mul = g.add_node("Mul", {add->output(0), add->output(0)}, {}, {f32({1, 4})});
    g.add_output(mul->output(0));
    EXPECT_EQ(add->output(0)->name(), "y");
    EXPECT_EQ(add->output(0)->producer(), add);
    EXPECT_EQ(add->output(0)->producer_index(), 0);
    EXPECT_FALSE(mul->output(0)->name().empty());
    EXPECT_EQ(count(x->users(), add), 1u);
    // A node reading a value in two slots appears twice.
    EXPECT_EQ(count(add->output(0)->users(), mul), 2u);
    EXPECT_EQ(g.find_value("y"), add->output(0));
    EXPECT_EQ(g.find_value("nope"), nullptr);
    EXPECT_EQ(g.num_nodes(), 2u);
    EXPECT_EQ(add->describe(), "node 'add1' (Add)");
    EXPECT_EQ(mul->describe(), "node producing '" + mul->output(0)->name() + "' (Mul)");
    verify_graph(g);
}

TEST(Graph, DuplicateNamesRejected) {
    Graph g;
    g.add_input("x", f32({2}));
    try {
        g.add_input("x", f32({2}));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(e.message().find("'x'"), std::string::npos) << e.message();
    }
    EXPECT_THROW(g.add_node("Relu", {g.find_value("x")}, {}, {f32({2})}, {"x"}), Error);
    EXPECT_THROW(g.add_node("Split", {}, {}, {f32({1}), f32({1})}, {"a", "a"}), Error);
    EXPECT_EQ(g.num_nodes(), 0u);
    EXPECT_TRUE(g.find_value("x")->users().empty());
}

TEST(Graph, FreshNameAvoidsExisting) {
    Graph g;
    g.add_input("v0", f32({1}));
    g.add_input("v1", f32({1}));
    std::string n = g.fresh_name();
    EXPECT_NE(n, "v0");
    EXPECT_NE(n, "v1");
    EXPECT_EQ(g.find_value(n), nullptr);
    std::string t = g.fresh_name("tmp");
    EXPECT_EQ(t.rfind("tmp", 0), 0u);
    // Renaming is seen by find_value.
    g.find_value("v0")->set_name("renamed");
    EXPECT_EQ(g.find_value("v0"), nullptr);
    ASSERT_NE(g.find_value("renamed"), nullptr);
    EXPECT_EQ(g.find_value("renamed")->name(), "renamed");
}

TEST(Graph, OmittedOptionalInputIsNull) {
    Graph g;
    Value* x = g.add_input("x", f32({1, 3, 4, 4}));
    Value* w = g.add_input("w", f32({2, 3, 1, 1}));
    Node* n = g.add_node("Conv", {x, w, nullptr}, {}, {f32({1, 2, 4, 4})});
    EXPECT_EQ(n->num_inputs(), 3u);
    EXPECT_EQ(n->input(2), nullptr);
    EXPECT_EQ(n->input(7), nullptr);
    verify_graph(g);
}

TEST(Graph, SetInputAndReplaceAllUses) {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Value* b = g.add_input("b", f32({2}));
    Node* n1 = g.add_node("Add", {a, a}, {}, {f32({2})}, {"s"});
    Node* n2 = g.add_node("Neg", {a}, {}, {f32({2})}, {"t"});
    g.set_outputs({n1->output(0), a});
    n1->set_input(1, b);
    EXPECT_EQ(count(a->users(), n1), 1u);
    EXPECT_EQ(count(b->users(), n1), 1u);
    g.replace_all_uses(a, b);
    EXPECT_TRUE(a->users().empty());
    EXPECT_EQ(count(b->users(), n1), 2u);
    EXPECT_EQ(count(b->users(), n2), 1u);
    EXPECT_EQ(n2->input(0), b);
    EXPECT_EQ(g.outputs()[1], b);  // graph outputs are uses too
    verify_graph(g);
}

TEST(Graph, EraseNode) {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Node* dead = g.add_node("Relu", {a}, {}, {f32({2})}, {"dead"});
    Node* live = g.add_node("Neg", {a}, {}, {f32({2})}, {"live"});
    g.add_output(live->output(0));
    EXPECT_EQ(a->users().size(), 2u);
    g.erase_node(dead);
    EXPECT_EQ(g.num_nodes(), 1u);
    EXPECT_EQ(a->users().size(), 1u);
    EXPECT_EQ(g.find_value("dead"), nullptr);
    // The name is free again.
    g.add_node("Relu", {a}, {}, {f32({2})}, {"dead"});
    verify_graph(g);
    // Erasing a node whose output is still used is a bug in the caller.
    try {
        g.erase_node(live);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    }
}

TEST(Graph, EraseConstant) {
    Graph g;
    Value* c = g.add_constant("c", Tensor(DType::kInt64, {2}));
    g.erase_constant(c);
    EXPECT_TRUE(g.constants().empty());
    EXPECT_EQ(g.find_value("c"), nullptr);
}

TEST(Graph, FreezeInput) {
    Graph g;
    Value* x = g.add_input("x", f32({Dim::sym("N"), 2}));
    Value* y = g.add_input("y", f32({2}));
    Node* n = g.add_node("Add", {x, y}, {}, {f32({Dim::sym("N"), 2})});
    g.add_output(n->output(0));
    Tensor wrong(DType::kFloat32, {3, 3});
    EXPECT_THROW(g.freeze_input(x, wrong), Error);
    Tensor wrong_dtype(DType::kInt32, {3, 2});
    EXPECT_THROW(g.freeze_input(x, wrong_dtype), Error);
    Tensor data(DType::kFloat32, {3, 2});
    data.set_f64(5, 2.5);
    g.freeze_input(x, data);
    EXPECT_FALSE(x->is_graph_input());
    EXPECT_TRUE(x->is_constant());
    EXPECT_EQ(x->type(), TensorType::of_static(DType::kFloat32, {3, 2}));
    EXPECT_EQ(x->constant().get_f64(5), 2.5);
    ASSERT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(g.inputs()[0], y);
    ASSERT_EQ(g.constants().size(), 1u);
    EXPECT_EQ(g.constants()[0], x);
    EXPECT_EQ(x->users().size(), 1u);
    verify_graph(g);
    // A constant is no longer an input.
    EXPECT_THROW(g.freeze_input(x, data), Error);
}

TEST(Graph, TopoSortIsStable) {
    Graph g;
    Value* a = g.add_input("a", f32({1}));
    // Build out of order: c reads b, which is appended later; independent d stays in place.
    Node* d = g.add_node("Neg", {a}, {}, {f32({1})}, {"d"});
    Node* c = g.add_node("Relu", {a}, {}, {f32({1})}, {"c"});
    Node* b = g.add_node("Abs", {a}, {}, {f32({1})}, {"b"});
    c->set_input(0, b->output(0));
    EXPECT_THROW(verify_graph(g), Error);
    g.topo_sort();
    std::vector<Node*> order = g.nodes();
    ASSERT_EQ(order.size(), 3u);
    EXPECT_EQ(order[0], d);
    EXPECT_EQ(order[1], b);
    EXPECT_EQ(order[2], c);
    verify_graph(g);
    // Already sorted: unchanged.
    g.topo_sort();
    EXPECT_EQ(g.nodes(), order);
}

TEST(Graph, TopoSortDetectsCycle) {
    Graph g;
    Value* a = g.add_input("a", f32({1}));
    Node* n1 = g.add_node("Relu", {a}, {}, {f32({1})}, {"p"});
    Node* n2 = g.add_node("Neg", {n1->output(0)}, {}, {f32({1})}, {"q"});
    n1->set_input(0, n2->output(0));
    try {
        g.topo_sort();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(e.message().find("cycle"), std::string::npos);
    }
    EXPECT_EQ(g.num_nodes(), 2u);  // graph kept whole
}

TEST(Graph, AttrAccessors) {
    Graph g;
    Value* x = g.add_input("x", f32({1}));
    AttrMap attrs{{"i", int64_t{3}},
                  {"f", 0.5},
                  {"s", std::string("same")},
                  {"is", std::vector<int64_t>{1, 2}},
                  {"fs", std::vector<double>{0.25}}};
    Node* n = g.add_node("Op", {x}, attrs, {f32({1})}, {}, "op1");
    EXPECT_EQ(n->attr_int("i", 0), 3);
    EXPECT_EQ(n->attr_int("missing", 7), 7);
    EXPECT_EQ(n->attr_float("f", 0), 0.5);
    EXPECT_EQ(n->attr_float("i", 0), 3.0);  // int accepted where a float is expected
    EXPECT_EQ(n->attr_string("s", ""), "same");
    EXPECT_EQ(n->attr_ints("is"), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(n->attr_floats("fs"), (std::vector<double>{0.25}));
    EXPECT_EQ(n->attr_ints("missing", {9}), (std::vector<int64_t>{9}));
    try {
        n->attr_int("f", 0);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(e.message().find("op1"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("'f'"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("expected int, got float"), std::string::npos) << e.message();
    }
    EXPECT_THROW(n->attr_string("i", ""), Error);
    EXPECT_THROW(n->attr_ints("fs"), Error);
    EXPECT_THROW(n->attr_float("s", 0), Error);
}

}  // namespace
}  // namespace kiln::ir
