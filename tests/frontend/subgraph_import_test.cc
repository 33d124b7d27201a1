// Importing what the graph interpreter runs: sub-graph attributes with outer-scope names, string
// tensors (initializers, Constant value_strings), sequence/optional graph inputs, operator
// domains other than ai.onnx, and .pb files holding sequences and optionals.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <onnx/onnx-data_pb.h>

#include "frontend/onnx/importer.h"
#include "onnx_model_builder.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

using namespace testing;

// y = If(c) { then: x2 * x2 } else { else: x2 }, x2 = x + x in the outer graph.
onnx::ModelProto if_model() {
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "c", {}, onnx::TensorProto::BOOL);
    add_input(g, "x", {int64_t{3}});
    add_node(g, "Add", {"x", "x"}, {"x2"}, "twice");
    onnx::NodeProto* iff = add_node(g, "If", {"c"}, {"y"}, "branch");
    onnx::AttributeProto* then_a = iff->add_attribute();
    then_a->set_name("then_branch");
    then_a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* tg = then_a->mutable_g();
    tg->set_name("then");
    add_node(tg, "Mul", {"x2", "x2"}, {"t"}, "square");
    add_output(tg, "t", {int64_t{3}});
    onnx::AttributeProto* else_a = iff->add_attribute();
    else_a->set_name("else_branch");
    else_a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* eg = else_a->mutable_g();
    eg->set_name("else");
    add_output(eg, "x2", {int64_t{3}});  // passes the outer value through
    add_output(g, "y", {int64_t{3}});
    return m;
}

TEST(SubgraphImport, OuterNamesBecomeOuterInputs) {
    ir::Graph g = import_onnx_bytes(serialize(if_model()));
    std::vector<ir::Node*> nodes = g.nodes();
    ASSERT_EQ(nodes.size(), 2u);
    ir::Node* iff = nodes[1];
    ASSERT_EQ(iff->op(), "If");
    const auto& then_g = *std::get<ir::GraphAttr>(iff->attrs().at("then_branch"));
    EXPECT_EQ(then_g.name, "then");
    EXPECT_TRUE(then_g.inputs().empty());
    ASSERT_EQ(then_g.outer_inputs().size(), 1u);
    EXPECT_EQ(then_g.outer_inputs()[0]->name(), "x2");
    EXPECT_EQ(then_g.outer_inputs()[0]->type().str(), "f32[3]");  // the outer value's type
    ASSERT_EQ(then_g.num_nodes(), 1u);
    EXPECT_EQ(then_g.nodes()[0]->input(0), then_g.outer_inputs()[0]);

    const auto& else_g = *std::get<ir::GraphAttr>(iff->attrs().at("else_branch"));
    ASSERT_EQ(else_g.outputs().size(), 1u);
    EXPECT_EQ(else_g.outputs()[0], else_g.outer_inputs().at(0));
}

TEST(SubgraphImport, AnUnknownNameInASubgraphIsAnError) {
    onnx::ModelProto m = if_model();
    auto* then_g = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
    then_g->mutable_node(0)->set_input(1, "missing");
    try {
        import_onnx_bytes(serialize(m));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos) << e.what();
    }
}

// Corrupted bytes of a model with sub-graphs: kiln::Error or success, never a crash.
TEST(SubgraphImport, FuzzByteFlips) {
    int threw = fuzz_byte_flips(serialize(if_model()), 3000, 99, [](const std::string& b) { import_onnx_bytes(b); });
    EXPECT_GT(threw, 1000);  // most corruptions are detected; reaching here means none crashed
}

TEST(StringImport, InitializersAndConstantStrings) {
    onnx::ModelProto m = make_model(20);
    auto* g = m.mutable_graph();
    add_input(g, "s", {int64_t{2}}, onnx::TensorProto::STRING);
    onnx::TensorProto* init = g->add_initializer();
    init->set_name("suffix");
    init->set_data_type(onnx::TensorProto::STRING);
    init->add_dims(2);
    init->add_string_data("ab");
    init->add_string_data("\xc3\xa9t\xc3\xa9");  // UTF-8 bytes are kept as they are
    onnx::NodeProto* c = add_node(g, "Constant", {}, {"k"}, "k");
    onnx::AttributeProto* a = c->add_attribute();
    a->set_name("value_strings");
    a->set_type(onnx::AttributeProto::STRINGS);
    a->add_strings("x");
    a->add_strings("");
    add_node(g, "StringConcat", {"s", "suffix"}, {"y"}, "cat");
    add_output(g, "y", {int64_t{2}}, onnx::TensorProto::STRING);
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.inputs()[0]->type().str(), "str[2]");
    const Tensor& suffix = ig.find_value("suffix")->constant();
    ASSERT_EQ(suffix.dtype(), DType::kString);
    EXPECT_EQ(suffix.data_as<std::string>()[1], "\xc3\xa9t\xc3\xa9");
    const Tensor& k = ig.find_value("k")->constant();
    ASSERT_EQ(k.shape(), Shape({2}));
    EXPECT_EQ(k.data_as<std::string>()[0], "x");
    EXPECT_EQ(k.data_as<std::string>()[1], "");
}

TEST(SequenceImport, SequenceAndOptionalInputs) {
    onnx::ModelProto m = make_model(18);
    auto* g = m.mutable_graph();
    auto* seq = g->add_input();
    seq->set_name("xs");
    seq->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::INT64);
    auto* opt = g->add_input();
    opt->set_name("o");
    opt->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT);
    add_node(g, "SequenceLength", {"xs"}, {"n"}, "len");
    add_output(g, "n", {}, onnx::TensorProto::INT64);
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.inputs()[0]->type().str(), "seq<i64[]>");
    EXPECT_EQ(ig.inputs()[1]->type().str(), "opt<f32[]>");
}

TEST(DomainImport, OpsResolveInTheirDomain) {
    onnx::ModelProto m = make_model(1, "ai.onnx.ml");
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    onnx::NodeProto* n = add_node(g, "Binarizer", {"x"}, {"y"}, "bin");
    n->set_domain("ai.onnx.ml");
    add_output(g, "y", {int64_t{3}});
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.nodes()[0]->op(), "Binarizer");

    // The same op named in the default domain is not Kiln's Binarizer, and an undeclared
    // domain is an invalid model.
    n->set_domain("");
    EXPECT_THROW(import_onnx_bytes(serialize(m)), Error);
    n->set_domain("ai.onnx.other");
    try {
        import_onnx_bytes(serialize(m));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ai.onnx.other"), std::string::npos) << e.what();
    }
}

TEST(ValueProtoFiles, SequencesAndOptionals) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("kiln_value_proto_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto write = [&](const std::string& name, const google::protobuf::MessageLite& msg) {
        std::ofstream f(dir / name, std::ios::binary);
        msg.SerializeToOstream(&f);
        return (dir / name).string();
    };
    onnx::SequenceProto seq;
    seq.set_elem_type(onnx::SequenceProto::TENSOR);
    for (int i = 0; i < 2; ++i) {
        onnx::TensorProto* t = seq.add_tensor_values();
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_dims(i + 1);
        for (int j = 0; j <= i; ++j) t->add_int64_data(10 * i + j);
    }
    ir::TensorType seq_t(DType::kInt64, {});
    seq_t.kind = ir::TypeKind::kSequence;
    Datum d = read_value_proto_file(write("seq.pb", seq), seq_t);
    ASSERT_TRUE(d.is_sequence());
    ASSERT_EQ(d.items().size(), 2u);
    EXPECT_EQ(d.items()[1].shape(), Shape({2}));
    EXPECT_EQ(d.items()[1].get_i64(1), 11);

    onnx::OptionalProto empty;
    empty.set_elem_type(onnx::OptionalProto::TENSOR);
    ir::TensorType opt_t(DType::kFloat32, {});
    opt_t.kind = ir::TypeKind::kOptionalTensor;
    EXPECT_TRUE(read_value_proto_file(write("none.pb", empty), opt_t).is_none());

    onnx::OptionalProto full;
    full.set_elem_type(onnx::OptionalProto::SEQUENCE);
    *full.mutable_sequence_value() = seq;
    opt_t.kind = ir::TypeKind::kOptionalSequence;
    EXPECT_EQ(read_value_proto_file(write("opt_seq.pb", full), opt_t).items().size(), 2u);
    fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::frontend
