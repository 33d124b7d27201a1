// Shape inference and schema validation of the ops the benchmark models need (Erf Sqrt Log Neg
// Abs Pow Gelu LayerNormalization ReduceMean Gather): output types written by hand from the ONNX
// spec formulas, and the error kind + message for bad shapes, dtypes and attributes.
#include <gtest/gtest.h>

#include <map>

#include "op_test_util.h"

namespace kiln::op::testing {
namespace {

using ir::Dim;
using Ints = std::vector<int64_t>;
constexpr DType F32 = DType::kFloat32;
constexpr DType I32 = DType::kInt32;
constexpr DType I64 = DType::kInt64;

ir::TensorType out(ir::Node* n, size_t i = 0) { return n->output(i)->type(); }

TEST(InferModelOps, VersionsAreListed) {
    const std::map<std::string, std::vector<int>> want = {
        {"Erf", {9, 13}},          {"Sqrt", {1, 6, 13}},         {"Log", {1, 6, 13}},
        {"Neg", {1, 6, 13}},       {"Abs", {1, 6, 13}},          {"Pow", {1, 7, 12, 13, 15}},
        {"Gelu", {20}},            {"LayerNormalization", {17}}, {"ReduceMean", {1, 11, 13, 18}},
        {"Gather", {1, 11, 13}}};
    for (const auto& [name, versions] : want) {
        const OpDef* d = OpRegistry::global().find(name);
        ASSERT_NE(d, nullptr) << name;
        EXPECT_EQ(d->onnx_versions, versions) << name;
    }
    EXPECT_EQ(OpRegistry::global().find("ReduceMean")->value_inputs, std::vector<int>{1});
    EXPECT_EQ(OpRegistry::global().find("LayerNormalization")->pattern, OpPattern::kOpaque);
    EXPECT_EQ(OpRegistry::global().find("ReduceMean")->pattern, OpPattern::kCommReduce);
    EXPECT_EQ(OpRegistry::global().find("Gather")->pattern, OpPattern::kInjective);
}

TEST(InferModelOps, UnaryMath) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Erf", {tt(F32, {Dim::sym("N"), 3})})), tt(F32, {Dim::sym("N"), 3}));
    EXPECT_EQ(out(make_node(g, "Sqrt", {tt(DType::kFloat16, {4})})), tt(DType::kFloat16, {4}));
    EXPECT_EQ(out(make_node(g, "Neg", {tt(DType::kInt8, {2})})), tt(DType::kInt8, {2}));
    EXPECT_EQ(out(make_node(g, "Abs", {tt(DType::kUInt32, {2})})), tt(DType::kUInt32, {2}));
    EXPECT_EQ(out(make_node(g, "Log", {tt(DType::kFloat64, {})})), tt(DType::kFloat64, {}));
    expect_error([&] { make_node(g, "Neg", {tt(DType::kUInt8, {2})}, {}, 1, {}, "n"); }, ErrorKind::kUnsupported,
                 "Neg node 'n': op Neg does not support dtype u8");
    expect_error([&] { make_node(g, "Sqrt", {tt(I32, {2})}); }, ErrorKind::kUnsupported, "does not support dtype i32");
    expect_error([&] { make_node(g, "Abs", {tt(DType::kBool, {2})}); }, ErrorKind::kUnsupported,
                 "does not support dtype bool");
}

TEST(InferModelOps, Pow) {
    ir::Graph g;
    // The result has the base's dtype; the exponent may differ (Pow-12+).
    EXPECT_EQ(out(make_node(g, "Pow", {tt(F32, {2, 1, 4}), tt(I64, {3, 1})})), tt(F32, {2, 3, 4}));
    EXPECT_EQ(out(make_node(g, "Pow", {tt(I32, {3}), tt(F32, {})})), tt(I32, {3}));
    expect_error([&] { make_node(g, "Pow", {tt(F32, {2, 3}), tt(F32, {4})}, {}, 1, {}, "p"); }, ErrorKind::kInvalidModel,
                 "Pow node 'p': shapes [2,3] and [4] are not broadcastable");
    expect_error([&] { make_node(g, "Pow", {tt(DType::kUInt8, {2}), tt(F32, {2})}); }, ErrorKind::kUnsupported,
                 "does not support dtype u8 (input X)");
    expect_error([&] { make_node(g, "Pow", {tt(F32, {2}), tt(DType::kBool, {2})}); }, ErrorKind::kUnsupported,
                 "does not support dtype bool (input Y)");
}

TEST(InferModelOps, Gelu) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Gelu", {tt(F32, {2, 3})}, {{"approximate", std::string("tanh")}})), tt(F32, {2, 3}));
    ir::Node* n = make_node(g, "Gelu", {tt(F32, {2})});
    EXPECT_EQ(n->attr_string("approximate", ""), "none");  // default filled in
    expect_error([&] { make_node(g, "Gelu", {tt(F32, {2})}, {{"approximate", std::string("fast")}}, 1, {}, "g"); },
                 ErrorKind::kInvalidModel, "Gelu node 'g': attribute approximate must be 'none' or 'tanh', got 'fast'");
    expect_error([&] { make_node(g, "Gelu", {tt(I32, {2})}); }, ErrorKind::kUnsupported, "does not support dtype i32");
}

TEST(InferModelOps, LayerNormalization) {
    ir::Graph g;
    ir::Node* n = make_node(g, "LayerNormalization", {tt(F32, {2, 3, 4}), tt(F32, {4}), tt(F32, {4})}, {}, 3);
    EXPECT_EQ(out(n, 0), tt(F32, {2, 3, 4}));
    EXPECT_EQ(out(n, 1), tt(F32, {2, 3, 1}));
    EXPECT_EQ(out(n, 2), tt(F32, {2, 3, 1}));
    // axis 1, symbolic batch, f16 input: the statistics have the stash type f32.
    ir::Node* h = make_node(g, "LayerNormalization", {tt(DType::kFloat16, {Dim::sym("B"), 3, 4}),
                                                      tt(DType::kFloat16, {3, 4})},
                            {{"axis", int64_t{1}}}, 2);
    EXPECT_EQ(out(h, 0), tt(DType::kFloat16, {Dim::sym("B"), 3, 4}));
    EXPECT_EQ(out(h, 1), tt(F32, {Dim::sym("B"), 1, 1}));
    // Scale broadcasts to x.shape[axis:].
    EXPECT_EQ(out(make_node(g, "LayerNormalization", {tt(F32, {2, 3, 4}), tt(F32, {1})}, {{"axis", int64_t{0}}})),
              tt(F32, {2, 3, 4}));
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 3, 4}), tt(F32, {3})}, {}, 1, {}, "ln"); },
                 ErrorKind::kInvalidModel,
                 "LayerNormalization node 'ln': input Scale of shape [3] does not broadcast to the normalized shape [4]");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4}), tt(F32, {2, 4})}); }, ErrorKind::kInvalidModel,
                 "input Scale of shape [2,4] does not broadcast to the normalized shape [4] (axis 1)");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4}), tt(F32, {4}), tt(F32, {5})}); },
                 ErrorKind::kInvalidModel, "input B of shape [5] does not broadcast");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4}), tt(F32, {4})}, {{"axis", int64_t{2}}}); },
                 ErrorKind::kInvalidModel, "attribute axis=2 is out of range for rank 2");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4}), tt(DType::kFloat64, {4})}); },
                 ErrorKind::kInvalidModel, "expected the same dtype for X and Scale, got f32 and f64");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4}), tt(F32, {4})}, {{"stash_type", int64_t{11}}}); },
                 ErrorKind::kUnsupported, "stash_type=11 is not supported");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(I32, {2, 4}), tt(I32, {4})}); }, ErrorKind::kUnsupported,
                 "does not support dtype i32");
    expect_error([&] { make_node(g, "LayerNormalization", {tt(F32, {2, 4})}); }, ErrorKind::kInvalidModel,
                 "expected 2 to 3 inputs");
}

TEST(InferModelOps, ReduceMean) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {2, 5, 3})}, {}, 1, {{1, int_tensor({1})}})), tt(F32, {2, 1, 3}));
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {2, 5, 3})}, {{"keepdims", int64_t{0}}}, 1, {{1, int_tensor({-1, 0})}})),
              tt(F32, {5}));
    // No axes: reduce everything (keepdims: all 1s) or, with noop_with_empty_axes, copy.
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {2, 5})})), tt(F32, {1, 1}));
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {2, 5})}, {{"keepdims", int64_t{0}}})), tt(F32, {}));
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {2, 5})}, {{"noop_with_empty_axes", int64_t{1}}}, 1,
                            {{1, int_tensor({})}})),
              tt(F32, {2, 5}));
    EXPECT_EQ(out(make_node(g, "ReduceMean", {tt(F32, {Dim::sym("N"), 5})}, {}, 1, {{1, int_tensor({1})}})),
              tt(F32, {Dim::sym("N"), 1}));
    expect_error([&] { make_node(g, "ReduceMean", {tt(F32, {2, 5})}, {}, 1, {{1, int_tensor({1, -1})}}, "rm"); },
                 ErrorKind::kInvalidModel, "ReduceMean node 'rm': axis -1 appears more than once in input axes");
    expect_error([&] { make_node(g, "ReduceMean", {tt(F32, {2, 5})}, {}, 1, {{1, int_tensor({2})}}); },
                 ErrorKind::kInvalidModel, "attribute axes=2 is out of range for rank 2");
    expect_error([&] { make_node(g, "ReduceMean", {tt(F32, {2, 5}), tt(I64, {1})}); }, ErrorKind::kUnsupported,
                 "must be a constant");
    expect_error([&] { make_node(g, "ReduceMean", {tt(DType::kInt8, {2})}); }, ErrorKind::kUnsupported,
                 "does not support dtype i8");
}

TEST(InferModelOps, Gather) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Gather", {tt(F32, {30522, 768}), tt(I64, {1, 128})})), tt(F32, {1, 128, 768}));
    EXPECT_EQ(out(make_node(g, "Gather", {tt(DType::kBool, {2, 6, 3}), tt(I32, {4, 5})}, {{"axis", int64_t{1}}})),
              tt(DType::kBool, {2, 4, 5, 3}));
    EXPECT_EQ(out(make_node(g, "Gather", {tt(F32, {2, 6}), tt(I64, {})}, {{"axis", int64_t{-1}}})), tt(F32, {2}));
    EXPECT_EQ(out(make_node(g, "Gather", {tt(F32, {Dim::sym("V"), 6}), tt(I64, {Dim::sym("S")})})),
              tt(F32, {Dim::sym("S"), 6}));
    // Constant indices are range-checked (negative ones count from the end).
    EXPECT_EQ(out(make_node(g, "Gather", {tt(F32, {5, 2})}, {}, 1, {{1, int_tensor({-5, 4})}})), tt(F32, {2, 2}));
    expect_error([&] { make_node(g, "Gather", {tt(F32, {5, 2})}, {}, 1, {{1, int_tensor({0, 5})}}, "ga"); },
                 ErrorKind::kInvalidModel,
                 "Gather node 'ga': index 5 (element 1 of indices) is out of range for axis 0 of size 5");
    expect_error([&] { make_node(g, "Gather", {tt(F32, {5, 2})}, {}, 1, {{1, int_tensor({-6})}}); },
                 ErrorKind::kInvalidModel, "index -6");
    expect_error([&] { make_node(g, "Gather", {tt(F32, {5, 2}), tt(F32, {3})}); }, ErrorKind::kUnsupported,
                 "does not support dtype f32 (input indices)");
    expect_error([&] { make_node(g, "Gather", {tt(F32, {5, 2}), tt(I64, {3})}, {{"axis", int64_t{2}}}); },
                 ErrorKind::kInvalidModel, "attribute axis=2 is out of range for rank 2");
    expect_error([&] { make_node(g, "Gather", {tt(F32, {}), tt(I64, {3})}); }, ErrorKind::kInvalidModel,
                 "input data must have rank >= 1");
}

}  // namespace
}  // namespace kiln::op::testing

namespace kiln::op::testing {
namespace {

// The integer products count their multiply-adds twice, as the float ops they replace (the
// profile's GFLOP/s column then reads int8 GOP/s): written out from the shapes here.
TEST(InferModelOps, IntegerConvAndMatMulCountTheirMultiplyAdds) {
    constexpr DType U8 = DType::kUInt8, S8 = DType::kInt8;
    ir::Graph g;
    auto scalar = [](DType t) { return tt(t, {}); };
    // QLinearConv: x [1,8,10,10] u8, w [16,4,3,3] s8 (group 2), pads 1: y [1,16,10,10].
    ir::Node* qc = make_node(g, "QLinearConv",
                             {tt(U8, {1, 8, 10, 10}), scalar(F32), scalar(U8), tt(S8, {16, 4, 3, 3}), scalar(F32),
                              scalar(S8), scalar(F32), scalar(U8)},
                             {{"group", ir::Attr(int64_t{2})}, {"pads", ir::Attr(Ints{1, 1, 1, 1})}});
    EXPECT_EQ(OpRegistry::global().find("QLinearConv")->flops(*qc), 2.0 * 1600 * (4 * 3 * 3));
    ir::Node* ci = make_node(g, "ConvInteger", {tt(U8, {1, 4, 6, 6}), tt(S8, {5, 4, 1, 1})});
    EXPECT_EQ(OpRegistry::global().find("ConvInteger")->flops(*ci), 2.0 * 180 * 4);
    ir::Node* mi = make_node(g, "MatMulInteger", {tt(U8, {3, 7}), tt(S8, {7, 5})});
    EXPECT_EQ(OpRegistry::global().find("MatMulInteger")->flops(*mi), 2.0 * 15 * 7);
    ir::Node* qm = make_node(g, "QLinearMatMul",
                             {tt(U8, {2, 3, 7}), scalar(F32), scalar(U8), tt(S8, {7, 5}), scalar(F32), scalar(S8),
                              scalar(F32), scalar(U8)});
    EXPECT_EQ(OpRegistry::global().find("QLinearMatMul")->flops(*qm), 2.0 * 30 * 7);
}

}  // namespace
}  // namespace kiln::op::testing
