// Bad models: each asserts the error kind and a message substring; a fuzz loop over prefixes
// and byte flips of a valid model must throw kiln::Error or succeed, never crash.
#include <gtest/gtest.h>

#include <random>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/opset.h"
#include "onnx_model_builder.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

using namespace testing;

struct Outcome {
    ErrorKind kind = ErrorKind::kInternal;
    std::string what;
    bool threw = false;
};

Outcome try_import(const std::string& bytes) {
    Outcome o;
    try {
        import_onnx_bytes(bytes);
    } catch (const Error& e) {
        o.threw = true;
        o.kind = e.kind();
        o.what = e.what();
    }
    return o;
}

void expect_error(const onnx::ModelProto& m, ErrorKind kind, const std::string& substr) {
    Outcome o = try_import(serialize(m));
    ASSERT_TRUE(o.threw) << "expected " << error_kind_name(kind) << " containing '" << substr << "'";
    EXPECT_EQ(o.kind, kind) << o.what;
    EXPECT_NE(o.what.find(substr), std::string::npos) << o.what;
}

onnx::ModelProto relu_add_model() {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{3}});
    add_float_init(g, "b", {3}, {1, 2, 3}, true);
    add_node(g, "Add", {"x", "b"}, {"s"}, "add");
    add_node(g, "Relu", {"s"}, {"y"}, "relu");
    auto* gemm_w = add_float_init(g, "w", {3, 2}, {1, 2, 3, 4, 5, 6});
    (void)gemm_w;
    add_node(g, "MatMul", {"y", "w"}, {"z"}, "mm");
    add_output(g, "z");
    return m;
}

TEST(OnnxImportErrors, GarbageAndMissingFile) {
    Outcome o = try_import(std::string("\x0a\xff\xff\xff\xff\x0f garbage", 14));
    EXPECT_TRUE(o.threw);
    EXPECT_EQ(o.kind, ErrorKind::kInvalidModel);
    EXPECT_NE(o.what.find("could not parse"), std::string::npos) << o.what;
    try {
        import_onnx_file("/nonexistent/dir/model.onnx");
        ADD_FAILURE() << "expected kIOError";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIOError);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.onnx"), std::string::npos);
    }
}

TEST(OnnxImportErrors, NoGraphNoOpsetNoOutputs) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    expect_error(m, ErrorKind::kInvalidModel, "no graph");

    onnx::ModelProto no_opset = relu_add_model();
    no_opset.clear_opset_import();
    expect_error(no_opset, ErrorKind::kInvalidModel, "opset");

    onnx::ModelProto no_out = relu_add_model();
    no_out.mutable_graph()->clear_output();
    expect_error(no_out, ErrorKind::kInvalidModel, "no outputs");

    onnx::ModelProto bad_out = relu_add_model();
    bad_out.mutable_graph()->mutable_output(0)->set_name("nope");
    expect_error(bad_out, ErrorKind::kInvalidModel, "graph output 'nope'");
}

TEST(OnnxImportErrors, UnknownOp) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    add_node(g, "Foo", {"x"}, {"y"}, "n1");
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported, "unsupported op 'Foo' (node 'n1', opset 13)");
    expect_error(m, ErrorKind::kUnsupported, "while importing node 'n1' (Foo)");
}

TEST(OnnxImportErrors, CustomDomain) {
    onnx::ModelProto m = make_model(13);
    auto* ms = m.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    // com.microsoft ops outside contrib_ops.cc's table (Gelu, FastGelu, ... import as standard ops).
    add_node(g, "QOrderedMatMul", {"x"}, {"y"}, "g1")->set_domain("com.microsoft");
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported, "unsupported op 'QOrderedMatMul' (node 'g1', domain com.microsoft)");
    expect_error(m, ErrorKind::kUnsupported, "Kiln imports these com.microsoft ops: Attention, BiasAdd");
}

TEST(OnnxImportErrors, OtherDomain) {
    onnx::ModelProto m = make_model(13);
    auto* ms = m.add_opset_import();
    ms->set_domain("com.example");
    ms->set_version(1);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    add_node(g, "Gelu", {"x"}, {"y"}, "g1")->set_domain("com.example");
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported, "unsupported op 'Gelu' (node 'g1', domain com.example opset 1)");
}

TEST(OnnxImportErrors, UnsupportedOpset) {
    // Any registered op whose first claimed version is above 1, imported at an older opset.
    const op::OpDef* def = nullptr;
    for (const op::OpDef* d : op::OpRegistry::global().all())
        if (!d->onnx_versions.empty() && d->onnx_versions.front() > 1 && d->min_inputs <= 1) def = d;
    if (!def) GTEST_SKIP() << "every registered op claims opset 1";
    const int opset = def->onnx_versions.front() - 1;
    onnx::ModelProto m = make_model(opset);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    add_node(g, def->name, {"x"}, {"y"}, "n");
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported,
                 "op '" + def->name + "' opset " + std::to_string(opset) + " not supported (Kiln implements versions " +
                     std::to_string(def->onnx_versions.front()));
}

TEST(OnnxImportErrors, UnsupportedInputTypes) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "z", {int64_t{3}}, onnx::TensorProto::COMPLEX64);
    add_node(g, "Identity", {"z"}, {"y"});
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported, "graph input 'z' has element type COMPLEX64");

    // Strings, sequences and optionals import (they run in the graph interpreter); maps do not.
    onnx::ModelProto s = make_model(13);
    auto* sg = s.mutable_graph();
    auto* in = sg->add_input();
    in->set_name("m");
    in->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::INT64);
    in->mutable_type()->mutable_map_type()->mutable_value_type()->mutable_tensor_type()->set_elem_type(1);
    add_node(sg, "Identity", {"m"}, {"y"});
    add_output(sg, "y");
    expect_error(s, ErrorKind::kUnsupported, "graph input 'm' has a type Kiln does not support");
}

TEST(OnnxImportErrors, UndefinedInputName) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    add_node(g, "Add", {"x", "foo"}, {"y"}, "x");
    add_node(g, "Relu", {"y"}, {"foo"}, "late");  // defined after its use: not topological
    add_output(g, "foo");
    expect_error(m, ErrorKind::kInvalidModel, "node 'x' (Add) reads 'foo', which is not defined before it");
}

TEST(OnnxImportErrors, DuplicateDefinitionAndBadConstant) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    add_node(g, "Relu", {"x"}, {"y"});
    add_node(g, "Relu", {"x"}, {"y"});
    add_output(g, "y");
    expect_error(m, ErrorKind::kInvalidModel, "'y' is defined twice");

    onnx::ModelProto c = make_model(13);
    auto* cg = c.mutable_graph();
    auto* cn = add_node(cg, "Constant", {}, {"k"}, "k");
    auto* a = cn->add_attribute();
    a->set_name("sparse_value");
    a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
    add_output(cg, "k");
    expect_error(c, ErrorKind::kUnsupported, "sparse_value");
}

TEST(OnnxImportErrors, UnknownAttributeAndGraphAttribute) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    attr_int(add_node(g, "Relu", {"x"}, {"y"}, "r"), "bogus", 1);
    add_output(g, "y");
    expect_error(m, ErrorKind::kUnsupported, "bogus");

    onnx::ModelProto m2 = make_model(13);
    auto* g2 = m2.mutable_graph();
    add_input(g2, "x", {int64_t{3}});
    auto* n = add_node(g2, "Relu", {"x"}, {"y"}, "r");
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name("sub");
    add_output(g2, "y");
    expect_error(m2, ErrorKind::kInvalidModel, "graph 'sub' has no outputs");
    add_output(a->mutable_g(), "x", {int64_t{3}});  // a valid sub-graph, on an op that takes none
    expect_error(m2, ErrorKind::kUnsupported, "unknown attribute 'body' for op Relu");
}

TEST(OnnxImportErrors, FuzzPrefixesAndByteFlips) {
    const std::string good = serialize(relu_add_model());
    ASSERT_NO_THROW(import_onnx_bytes(good));
    int threw = 0, ok = 0;
    for (size_t len = 0; len < good.size(); ++len) {
        try {
            import_onnx_bytes(good.substr(0, len));
            ++ok;
        } catch (const Error&) {
            ++threw;
        }
    }
    const int flipped_threw = fuzz_byte_flips(good, 3000, 1234, [](const std::string& b) { import_onnx_bytes(b); });
    threw += flipped_threw;
    ok += 3000 - flipped_threw;
    // Most corruptions are detected; reaching here means none crashed.
    EXPECT_GT(threw, static_cast<int>(good.size()) / 2);
    EXPECT_EQ(threw + ok, static_cast<int>(good.size()) + 3000);
}

}  // namespace
}  // namespace kiln::frontend

namespace kiln::frontend {
namespace {

TEST(OnnxOpset, SelectsLargestSinceVersion) {
    op::OpDef def;
    def.name = "Relu";
    def.onnx_versions = {6, 13, 14};
    EXPECT_EQ(select_since_version(def, 6), 6);
    EXPECT_EQ(select_since_version(def, 12), 6);
    EXPECT_EQ(select_since_version(def, 13), 13);
    EXPECT_EQ(select_since_version(def, 23), 14);
    EXPECT_EQ(select_since_version(def, 30), 14);  // newer than any opset known: unchanged op
    try {
        select_since_version(def, 5);
        ADD_FAILURE() << "expected kUnsupported";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_EQ(e.message(), "op 'Relu' opset 5 not supported (Kiln implements versions 6, 13, 14)");
    }
}

}  // namespace
}  // namespace kiln::frontend
