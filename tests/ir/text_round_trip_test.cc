// IR text form: print -> parse -> print is the identity, values survive bit-exactly, and a
// hand-written text parses into the expected structure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace kiln::ir {
namespace {

TensorType f32(std::vector<Dim> s) { return TensorType(DType::kFloat32, std::move(s)); }

// Prints, parses, prints again; both texts must match. Returns the parsed graph.
Graph round_trip(const Graph& g) {
    std::string a = print_graph(g);
    Graph h = parse_graph(a);
    verify_graph(h);
    std::string b = print_graph(h);
    EXPECT_EQ(a, b);
    return h;
}

uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

TEST(TextRoundTrip, ConvReluExample) {
    Graph g;
    Value* x = g.add_input("x", f32({1, 3, 8, 8}));
    Value* w = g.add_input("w", f32({4, 3, 3, 3}));
    Tensor bias(DType::kFloat32, {4});
    for (int i = 0; i < 4; ++i) bias.data_as<float>()[i] = 0.1f * static_cast<float>(i + 1);
    Value* b = g.add_constant("b", bias);
    Node* conv = g.add_node(
        "Conv", {x, w, b},
        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{1, 1}}},
        {f32({1, 4, 8, 8})}, {"y"}, "conv1");
    Node* relu = g.add_node("Relu", {conv->output(0)}, {}, {f32({1, 4, 8, 8})}, {"r"});
    g.add_output(relu->output(0));
    std::string text = print_graph(g);
    EXPECT_NE(text.find("graph main(%x: f32[1,3,8,8], %w: f32[4,3,3,3]) {"), std::string::npos)
        << text;
    EXPECT_NE(text.find("%y = Conv(%x, %w, %b) {pads=[1,1,1,1], strides=[1,1]} : f32[1,4,8,8] # "
                        "name=\"conv1\""),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("return %r"), std::string::npos) << text;
    Graph h = round_trip(g);
    const Tensor& c = h.find_value("b")->constant();
    for (int i = 0; i < 4; ++i)
        EXPECT_EQ(f32_bits(c.data_as<float>()[i]), f32_bits(0.1f * static_cast<float>(i + 1))) << i;
    EXPECT_EQ(h.nodes()[0]->name(), "conv1");
}

TEST(TextRoundTrip, EveryAttributeKind) {
    Graph g;
    Value* x = g.add_input("x", f32({2}));
    Tensor t(DType::kFloat32, {2});
    t.data_as<float>()[0] = 1.0f;
    t.data_as<float>()[1] = -2.5e-8f;
    Tensor t0(DType::kInt64, {});
    t0.data_as<int64_t>()[0] = -7;
    AttrMap attrs{
        {"i", int64_t{-3}},
        {"big", std::numeric_limits<int64_t>::min()},
        {"f", 1.0},
        {"f2", 0.1},
        {"f3", 1e-300},
        {"finf", -std::numeric_limits<double>::infinity()},
        {"s", std::string("a \"quoted\"\\ line\nbreak\t\x01")},
        {"is", std::vector<int64_t>{1, -2, 3}},
        {"fs", std::vector<double>{0.5, 2.0, -0.0}},
        {"ss", std::vector<std::string>{"a", "", "c d"}},
        {"ei", std::vector<int64_t>{}},
        {"ef", std::vector<double>{}},
        {"es", std::vector<std::string>{}},
        {"t", t},
        {"t0", t0},
        {"weird name", int64_t{1}},
    };
    Node* n = g.add_node("Custom", {x}, attrs, {f32({2})}, {"y"});
    g.add_output(n->output(0));
    Graph h = round_trip(g);
    const Node* m = h.nodes()[0];
    ASSERT_EQ(m->attrs().size(), attrs.size());
    EXPECT_EQ(m->attr_int("i", 0), -3);
    EXPECT_EQ(m->attr_int("big", 0), std::numeric_limits<int64_t>::min());
    EXPECT_TRUE(std::holds_alternative<double>(m->attrs().at("f")));  // 1.0 stays a float
    EXPECT_EQ(m->attr_float("f2", 0), 0.1);
    EXPECT_EQ(m->attr_float("f3", 0), 1e-300);
    EXPECT_EQ(m->attr_float("finf", 0), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(m->attr_string("s", ""), std::get<std::string>(attrs.at("s")));
    EXPECT_EQ(m->attr_ints("is"), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_EQ(m->attr_floats("fs"), (std::vector<double>{0.5, 2.0, -0.0}));
    EXPECT_TRUE(std::signbit(m->attr_floats("fs")[2]));
    EXPECT_EQ(std::get<std::vector<std::string>>(m->attrs().at("ss")),
              (std::vector<std::string>{"a", "", "c d"}));
    EXPECT_TRUE(std::holds_alternative<std::vector<int64_t>>(m->attrs().at("ei")));
    EXPECT_TRUE(std::holds_alternative<std::vector<double>>(m->attrs().at("ef")));
    EXPECT_TRUE(std::holds_alternative<std::vector<std::string>>(m->attrs().at("es")));
    const Tensor& tt = std::get<Tensor>(m->attrs().at("t"));
    EXPECT_EQ(tt.shape(), (Shape{2}));
    EXPECT_EQ(f32_bits(tt.data_as<float>()[1]), f32_bits(-2.5e-8f));
    const Tensor& tt0 = std::get<Tensor>(m->attrs().at("t0"));
    EXPECT_TRUE(tt0.shape().empty());
    EXPECT_EQ(tt0.data_as<int64_t>()[0], -7);
    EXPECT_EQ(m->attr_int("weird name", 0), 1);
}

TEST(TextRoundTrip, AttrStrForms) {
    EXPECT_EQ(attr_str(Attr{int64_t{3}}), "3");
    EXPECT_EQ(attr_str(Attr{0.5}), "0.5");
    EXPECT_EQ(attr_str(Attr{2.0}), "2.0");
    EXPECT_EQ(attr_str(Attr{std::string("same")}), "\"same\"");
    EXPECT_EQ(attr_str(Attr{std::vector<int64_t>{1, 1}}), "[1,1]");
    EXPECT_EQ(attr_str(Attr{std::vector<double>{}}), "[]:floats");
}

TEST(TextRoundTrip, ConstantsOfEveryDtype) {
    Graph g;
    // f16: 1.0 = 0x3C00, 65504 = 0x7BFF, smallest subnormal 2^-24 = 0x0001, -2 = 0xC000.
    Tensor h(DType::kFloat16, {4});
    const uint16_t hbits[] = {0x3C00, 0x7BFF, 0x0001, 0xC000};
    std::memcpy(h.data(), hbits, sizeof(hbits));
    g.add_constant("h", h);
    Tensor bf(DType::kBFloat16, {2});
    const uint16_t bfbits[] = {0x3DCD, 0xC2F7};  // 0.10009765625, -123.5
    std::memcpy(bf.data(), bfbits, sizeof(bfbits));
    g.add_constant("bf", bf);
    Tensor f(DType::kFloat32, {2, 3});
    const float fv[] = {0.1f,  -1e-45f, 3.4028235e38f, std::numeric_limits<float>::infinity(),
                        1e10f, -0.0f};
    std::memcpy(f.data(), fv, sizeof(fv));
    g.add_constant("f", f);
    Tensor d(DType::kFloat64, {2});
    d.data_as<double>()[0] = 0.1;
    d.data_as<double>()[1] = std::nan("");
    g.add_constant("d", d);
    Tensor i8(DType::kInt8, {2});
    i8.data_as<int8_t>()[0] = -128;
    i8.data_as<int8_t>()[1] = 127;
    g.add_constant("i8", i8);
    Tensor u64(DType::kUInt64, {1});
    u64.data_as<uint64_t>()[0] = 18446744073709551615ull;
    g.add_constant("u64", u64);
    Tensor b(DType::kBool, {3});
    b.data_as<uint8_t>()[1] = 1;
    g.add_constant("b", b);
    Tensor scalar(DType::kInt32, {});
    scalar.data_as<int32_t>()[0] = -2147483647 - 1;
    g.add_constant("scalar", scalar);
    g.add_constant("empty", Tensor(DType::kFloat32, {0, 3}));
    g.add_output(g.find_value("h"));  // a constant as graph output
    Graph p = round_trip(g);
    EXPECT_EQ(std::memcmp(p.find_value("h")->constant().data(), hbits, sizeof(hbits)), 0);
    EXPECT_EQ(std::memcmp(p.find_value("bf")->constant().data(), bfbits, sizeof(bfbits)), 0);
    const float* pf = p.find_value("f")->constant().data_as<float>();
    for (int i = 0; i < 6; ++i) EXPECT_EQ(f32_bits(pf[i]), f32_bits(fv[i])) << i;
    EXPECT_EQ(p.find_value("d")->constant().data_as<double>()[0], 0.1);
    EXPECT_TRUE(std::isnan(p.find_value("d")->constant().data_as<double>()[1]));
    EXPECT_EQ(p.find_value("i8")->constant().data_as<int8_t>()[0], -128);
    EXPECT_EQ(p.find_value("u64")->constant().data_as<uint64_t>()[0], 18446744073709551615ull);
    EXPECT_EQ(p.find_value("b")->constant().data_as<uint8_t>()[1], 1);
    EXPECT_EQ(p.find_value("b")->constant().data_as<uint8_t>()[2], 0);
    EXPECT_EQ(p.find_value("scalar")->type().str(), "i32[]");
    EXPECT_EQ(p.find_value("scalar")->constant().data_as<int32_t>()[0], -2147483647 - 1);
    EXPECT_EQ(p.find_value("empty")->type().str(), "f32[0,3]");
    ASSERT_EQ(p.outputs().size(), 1u);
    EXPECT_EQ(p.outputs()[0], p.find_value("h"));
}

TEST(TextRoundTrip, SymbolicDimsMultipleOutputsOmittedInputsWeirdNames) {
    Graph g;
    g.name = "my graph";
    Value* x = g.add_input("input.1", f32({Dim::sym("N"), Dim::sym("seq len"), 8, Dim::sym("?")}));
    Value* w = g.add_input("conv1/weight:0", TensorType(DType::kFloat16, {}));
    Value* z = g.add_input("0", f32({}));
    Node* split =
        g.add_node("Split", {x}, {{"axis", int64_t{1}}},
                   {f32({Dim::sym("N"), 1, 8, Dim::sym("?")}), f32({Dim::sym("N"), 2, 8, Dim()})},
                   {"a", "b\"q"});
    Node* opt = g.add_node("com.ms.Fused", {split->output(0), nullptr, w, nullptr}, {}, {f32({1})},
                           {"_"}, "n\n1");
    Node* sink =
        g.add_node("return", {opt->output(0)}, {}, {});  // no outputs; op named like a keyword
    (void)sink;
    g.set_outputs({split->output(1), x, z});
    std::string text = print_graph(g);
    EXPECT_NE(text.find("%\"conv1/weight:0\": f16[]"), std::string::npos) << text;
    EXPECT_NE(text.find("%input.1: f32[N,\"seq len\",8,?]"), std::string::npos) << text;
    EXPECT_NE(text.find("(%a, _, %\"conv1/weight:0\", _)"), std::string::npos) << text;
    Graph h = round_trip(g);
    EXPECT_EQ(h.name, "my graph");
    std::vector<Node*> nodes = h.nodes();
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0]->num_outputs(), 2u);
    EXPECT_EQ(nodes[0]->output(1)->name(), "b\"q");
    EXPECT_EQ(nodes[1]->op(), "com.ms.Fused");
    EXPECT_EQ(nodes[1]->name(), "n\n1");
    EXPECT_EQ(nodes[1]->input(1), nullptr);
    EXPECT_EQ(nodes[1]->input(3), nullptr);
    EXPECT_EQ(nodes[1]->input(2), h.find_value("conv1/weight:0"));
    EXPECT_EQ(nodes[2]->op(), "return");
    EXPECT_EQ(nodes[2]->num_outputs(), 0u);
    EXPECT_EQ(h.find_value("input.1")->type().shape[1], Dim::sym("seq len"));
    EXPECT_FALSE(h.find_value("input.1")->type().is_static());
    ASSERT_EQ(h.outputs().size(), 3u);
    EXPECT_EQ(h.outputs()[1], h.find_value("input.1"));
    EXPECT_EQ(h.outputs()[2], h.find_value("0"));
}

TEST(TextRoundTrip, HandWrittenText) {
    Graph g = parse_graph(R"(
// A comment line.
graph net(%x: f32[N,4], %"w 0": f32[4,4]) {
  const %b: f32[4] = [1, 2.5, -3e2, inf]
  %mm = MatMul(%x, %"w 0") : f32[N,4]
  %y = Add(%mm, %b) {alpha=2, beta=0.5} : f32[N,4]   # name="add_1"
  %q, %r = TopK(%y) {axis=-1, k=[]:ints} : f32[N,2], i64[N,2]
  return %q, %r
}
)");
    EXPECT_EQ(g.name, "net");
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.inputs()[1]->name(), "w 0");
    EXPECT_EQ(g.inputs()[0]->type().str(), "f32[N,4]");
    const Tensor& b = g.find_value("b")->constant();
    EXPECT_EQ(b.data_as<float>()[2], -300.0f);
    EXPECT_TRUE(std::isinf(b.data_as<float>()[3]));
    std::vector<Node*> nodes = g.nodes();
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0]->op(), "MatMul");
    EXPECT_EQ(nodes[0]->input(1), g.inputs()[1]);
    EXPECT_EQ(nodes[1]->name(), "add_1");
    EXPECT_EQ(nodes[1]->attr_int("alpha", 0), 2);
    EXPECT_EQ(nodes[1]->attr_float("beta", 0), 0.5);
    EXPECT_EQ(nodes[1]->input(0), nodes[0]->output(0));
    EXPECT_EQ(nodes[1]->input(1), g.find_value("b"));
    EXPECT_EQ(g.find_value("mm")->users().size(), 1u);
    EXPECT_EQ(nodes[2]->output(1)->type(), TensorType(DType::kInt64, {Dim::sym("N"), 2}));
    EXPECT_EQ(nodes[2]->attr_int("axis", 0), -1);
    EXPECT_TRUE(nodes[2]->attr_ints("k", {5}).empty());
    ASSERT_EQ(g.outputs().size(), 2u);
    EXPECT_EQ(g.outputs()[1], nodes[2]->output(1));
    verify_graph(g);
}

TEST(TextRoundTrip, ElidedConstantsDoNotParse) {
    Graph g;
    g.add_constant("c", Tensor(DType::kFloat32, {100}));
    PrintOptions o;
    o.max_constant_elements = 10;
    std::string text = print_graph(g, o);
    EXPECT_NE(text.find("<elided 100 values>"), std::string::npos) << text;
    EXPECT_THROW(parse_graph(text), Error);
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// String constants (the interpreted path's suffixes, label tables) print quoted and read back.
TEST(TextRoundTrip, StringConstants) {
    Graph g;
    Tensor s(DType::kString, {3});
    s.data_as<std::string>()[0] = "@kiln.dev";
    s.data_as<std::string>()[1] = "";
    s.data_as<std::string>()[2] = "quote \" and \\ backslash";
    Value* c = g.add_constant("suffix", s);
    g.add_output(c);
    Graph h = round_trip(g);
    const Tensor& back = h.find_value("suffix")->constant();
    ASSERT_EQ(back.dtype(), DType::kString);
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(back.data_as<std::string>()[i], s.data_as<std::string>()[i]);
}

}  // namespace
}  // namespace kiln::ir
