// Shape inference and schema validation for every op: output types written by hand from the
// ONNX spec formulas, and the error kind + message for bad shapes, dtypes and attributes.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace kiln::op::testing {
namespace {

using ir::Dim;
constexpr DType F32 = DType::kFloat32;
constexpr DType I64 = DType::kInt64;

ir::TensorType out(ir::Node* n, size_t i = 0) { return n->output(i)->type(); }

TEST(Registry, EveryOpHasSchemaAndComputeOrHost) {
    auto all = OpRegistry::global().all();
    // Every foundation op is registered (the full list lives in docs/ops.md, checked by tests/cli).
    for (const char* name : {"Add", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv", "Div", "Exp",
                             "Flatten", "Gemm", "GlobalAveragePool", "Identity", "MatMul", "MaxPool", "Mul", "Relu",
                             "Reshape", "Sigmoid", "Softmax", "Sub", "Tanh", "Transpose"})
        EXPECT_NE(OpRegistry::global().find(name), nullptr) << name;
    EXPECT_GE(all.size(), 200u);
    for (const OpDef* d : all) {
        EXPECT_EQ(d->onnx_versions.empty(), d->internal) << d->name;
        for (size_t i = 1; i < d->onnx_versions.size(); ++i) EXPECT_LT(d->onnx_versions[i - 1], d->onnx_versions[i]) << d->name;
        EXPECT_TRUE(d->infer) << d->name;
        // Every op has a meaning: a TE compute, or a host kernel (op/host.h) for what TE cannot say,
        // or (the TF1 control primitives) the frames executor's propagation (runtime/frame_executor.h).
        // KilnSend/KilnRecv, the two ends of a transfer between ranks, are lowered before anything
        // runs a rank graph (distributed/lower_transfers.h): no compute, no host kernel. So are the
        // collectives of ai.kiln.distributed (distributed/collective_model.h lowers them to MPI).
        const bool transfer_end = d->name == "KilnSend" || d->name == "KilnRecv";
        const bool collective = d->domain == "ai.kiln.distributed";
        EXPECT_TRUE(d->compute || d->host || d->frame_control || transfer_end || collective) << d->name;
    }
    EXPECT_EQ(OpRegistry::global().find("NoSuchOp"), nullptr);
    EXPECT_EQ(std::string(op_pattern_name(OpPattern::kOutEWiseFusable)), "out_elemwise_fusable");
}

TEST(Registry, DuplicateIsInternalError) {
    OpRegistry r;
    register_shape_ops(r);
    expect_error([&] { register_shape_ops(r); }, ErrorKind::kInternal, "duplicate op");
}

TEST(CheckNode, UnknownAttribute) {
    ir::Graph g;
    expect_error([&] { make_node(g, "Relu", {tt(F32, {2})}, {{"alpha", 1.0}}, 1, {}, "r1"); }, ErrorKind::kUnsupported,
                 "Relu node 'r1': unknown attribute 'alpha'");
}

TEST(CheckNode, AttributeKind) {
    ir::Graph g;
    expect_error([&] { make_node(g, "Softmax", {tt(F32, {2})}, {{"axis", std::string("x")}}); },
                 ErrorKind::kInvalidModel, "attribute 'axis' must be of kind int, got string");
}

TEST(CheckNode, IntWhereFloatExpectedIsConverted) {
    ir::Graph g;
    ir::Node* n = make_node(g, "Gemm", {tt(F32, {2, 3}), tt(F32, {3, 4})}, {{"alpha", int64_t{2}}});
    ASSERT_TRUE(std::holds_alternative<double>(n->attrs().at("alpha")));
    EXPECT_EQ(std::get<double>(n->attrs().at("alpha")), 2.0);
    // Defaults are filled.
    EXPECT_EQ(std::get<double>(n->attrs().at("beta")), 1.0);
    EXPECT_EQ(std::get<int64_t>(n->attrs().at("transB")), 0);
}

TEST(CheckNode, RequiredAttributeAndArity) {
    ir::Graph g;
    expect_error([&] { make_node(g, "Concat", {tt(F32, {2}), tt(F32, {2})}); }, ErrorKind::kInvalidModel,
                 "missing required attribute 'axis'");
    expect_error([&] { make_node(g, "Add", {tt(F32, {2})}, {}, 1, {}, "a"); }, ErrorKind::kInvalidModel,
                 "Add node 'a': expected 2 inputs, got 1");
    expect_error([&] { make_node(g, "Relu", {tt(F32, {2})}, {}, 2, {}, "r"); }, ErrorKind::kInvalidModel,
                 "expected 1 outputs, got 2");
    expect_error([&] { make_node(g, "Conv", {tt(F32, {1, 1, 3, 3}), std::nullopt}, {}, 1, {}, "c"); },
                 ErrorKind::kInvalidModel, "required input 1 is missing");
}

TEST(Infer, BinaryBroadcast) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Add", {tt(F32, {2, 1, 4}), tt(F32, {3, 1})})), tt(F32, {2, 3, 4}));
    EXPECT_EQ(out(make_node(g, "Mul", {tt(DType::kInt8, {}), tt(DType::kInt8, {5})})), tt(DType::kInt8, {5}));
    // Symbolic dims propagate.
    EXPECT_EQ(out(make_node(g, "Sub", {tt(F32, {Dim::sym("N"), 3}), tt(F32, {1, 3})})), tt(F32, {Dim::sym("N"), 3}));
    EXPECT_EQ(out(make_node(g, "Div", {tt(F32, {Dim::sym("N"), 1}), tt(F32, {4})})), tt(F32, {Dim::sym("N"), 4}));
    expect_error([&] { make_node(g, "Add", {tt(F32, {2, 3}), tt(F32, {4})}, {}, 1, {}, "a"); },
                 ErrorKind::kInvalidModel, "Add node 'a': shapes [2,3] and [4] are not broadcastable");
    expect_error([&] { make_node(g, "Add", {tt(F32, {2}), tt(I64, {2})}); }, ErrorKind::kInvalidModel,
                 "expected the same dtype for A and B, got f32 and i64");
    expect_error([&] { make_node(g, "Add", {tt(DType::kBool, {2}), tt(DType::kBool, {2})}, {}, 1, {}, "b"); },
                 ErrorKind::kUnsupported, "Add node 'b': op Add does not support dtype bool");
}

TEST(Infer, Unary) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Relu", {tt(DType::kInt32, {2, 3})})), tt(DType::kInt32, {2, 3}));
    EXPECT_EQ(out(make_node(g, "Sigmoid", {tt(DType::kFloat16, {4})})), tt(DType::kFloat16, {4}));
    EXPECT_EQ(out(make_node(g, "Tanh", {tt(DType::kFloat64, {Dim::sym("N")})})), tt(DType::kFloat64, {Dim::sym("N")}));
    EXPECT_EQ(out(make_node(g, "Identity", {tt(DType::kBool, {3})})), tt(DType::kBool, {3}));
    expect_error([&] { make_node(g, "Exp", {tt(DType::kInt32, {2})}, {}, 1, {}, "e"); }, ErrorKind::kUnsupported,
                 "Exp node 'e': op Exp does not support dtype i32");
}

TEST(Infer, Clip) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Clip", {tt(F32, {2, 3}), std::nullopt, tt(F32, {})})), tt(F32, {2, 3}));
    EXPECT_EQ(out(make_node(g, "Clip", {tt(DType::kInt32, {2})})), tt(DType::kInt32, {2}));
    expect_error([&] { make_node(g, "Clip", {tt(F32, {2}), tt(F32, {2})}); }, ErrorKind::kInvalidModel,
                 "input min must be a scalar, got shape [2]");
    expect_error([&] { make_node(g, "Clip", {tt(F32, {2}), tt(DType::kFloat64, {})}); }, ErrorKind::kInvalidModel,
                 "expected the same dtype for input and min, got f32 and f64");
}

TEST(Infer, Conv) {
    ir::Graph g;
    // (7 + 2 - 3) / 2 + 1 = 4
    EXPECT_EQ(out(make_node(g, "Conv", {tt(F32, {1, 3, 7, 7}), tt(F32, {8, 3, 3, 3}), tt(F32, {8})},
                            {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}})),
              tt(F32, {1, 8, 4, 4}));
    // Dilation 2, kernel 3 -> window 5: 9 - 5 + 1 = 5; groups.
    EXPECT_EQ(out(make_node(g, "Conv", {tt(F32, {Dim::sym("N"), 4, 9}), tt(F32, {6, 2, 3})},
                            {{"dilations", std::vector<int64_t>{2}}, {"group", int64_t{2}}})),
              tt(F32, {Dim::sym("N"), 6, 5}));
    // SAME_UPPER with stride 2: ceil(7/2) = 4. 3-D VALID.
    EXPECT_EQ(out(make_node(g, "Conv", {tt(F32, {1, 1, 7, 7}), tt(F32, {1, 1, 3, 3})},
                            {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}})),
              tt(F32, {1, 1, 4, 4}));
    EXPECT_EQ(out(make_node(g, "Conv", {tt(F32, {2, 1, 5, 6, 7}), tt(F32, {3, 1, 2, 3, 4})},
                            {{"auto_pad", std::string("VALID")}})),
              tt(F32, {2, 3, 4, 4, 4}));
    expect_error([&] { make_node(g, "Conv", {tt(F32, {1, 3, 7}), tt(F32, {8, 3, 3, 3})}, {}, 1, {}, "c1"); },
                 ErrorKind::kInvalidModel, "Conv node 'c1': input X has rank 3 but W has rank 4");
    expect_error([&] { make_node(g, "Conv", {tt(F32, {1, 4, 7, 7}), tt(F32, {8, 3, 3, 3})}); }, ErrorKind::kInvalidModel,
                 "input X has 4 channels but W expects 3 x group 1 = 3");
    expect_error([&] { make_node(g, "Conv", {tt(F32, {1, 3, 2, 2}), tt(F32, {8, 3, 3, 3})}); }, ErrorKind::kInvalidModel,
                 "is larger than the padded input");
    expect_error([&] { make_node(g, "Conv", {tt(F32, {1, 3, 5, 5}), tt(F32, {8, 3, 3, 3}), tt(F32, {4})}); },
                 ErrorKind::kInvalidModel, "bias B must have shape [8], got [4]");
    expect_error([&] { make_node(g, "Conv", {tt(DType::kInt32, {1, 3, 5, 5}), tt(DType::kInt32, {8, 3, 3, 3})}); },
                 ErrorKind::kUnsupported, "does not support dtype i32");
    expect_error([&] {
        make_node(g, "Conv", {tt(F32, {1, 3, 5, 5}), tt(F32, {8, 3, 3, 3})}, {{"pads", std::vector<int64_t>{1, 1}}});
    }, ErrorKind::kInvalidModel, "attribute pads has 2 entries, expected 4");
    // A symbolic spatial dim (a symbolic compile): the output's as a dim expression; a stride-2
    // window's rows as a floor atom (support/dim_poly.h).
    EXPECT_EQ(make_node(g, "Conv", {tt(F32, {1, 3, Dim::sym("H"), 5}), tt(F32, {8, 3, 3, 3})})->output(0)->type().str(),
              "f32[1,8,\"H-2\",3]");
    EXPECT_EQ(make_node(g, "Conv", {tt(F32, {1, 3, Dim::sym("H"), 5}), tt(F32, {8, 3, 3, 3})},
                        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}})
                  ->output(0)->type().str(),
              "f32[1,8,\"floor((H+1)/2)\",3]");
}

TEST(Infer, Pools) {
    ir::Graph g;
    // ceil((7 + 1 - 3) / 2) + 1 = 4; the last window starts at 6 < 7 + 0: kept.
    ir::Node* mp = make_node(g, "MaxPool", {tt(F32, {1, 2, 7, 7})},
                             {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                              {"pads", std::vector<int64_t>{0, 0, 1, 1}}, {"ceil_mode", int64_t{1}}},
                             2);
    EXPECT_EQ(out(mp, 0), tt(F32, {1, 2, 4, 4}));
    EXPECT_EQ(out(mp, 1), tt(I64, {1, 2, 4, 4}));
    // in 4, k 1, s 2, pad end 2: ceil((6-1)/2)+1 = 4, last start 6 >= 4 -> dropped: 3.
    // in 5, k 2, s 2, pads 0: ceil(3/2)+1 = 3; last start 4 < 5 -> kept: 3.
    EXPECT_EQ(out(make_node(g, "AveragePool", {tt(F32, {1, 1, 4})},
                            {{"kernel_shape", std::vector<int64_t>{1}}, {"strides", std::vector<int64_t>{2}},
                             {"pads", std::vector<int64_t>{0, 2}}, {"ceil_mode", int64_t{1}}})),
              tt(F32, {1, 1, 3}));
    EXPECT_EQ(out(make_node(g, "AveragePool", {tt(F32, {1, 1, 5, 5})},
                            {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                             {"ceil_mode", int64_t{1}}})),
              tt(F32, {1, 1, 3, 3}));
    EXPECT_EQ(out(make_node(g, "GlobalAveragePool", {tt(F32, {2, 3, 5, 6})})), tt(F32, {2, 3, 1, 1}));
    EXPECT_EQ(out(make_node(g, "MaxPool", {tt(DType::kUInt8, {1, 1, 9})},
                            {{"kernel_shape", std::vector<int64_t>{3}}, {"auto_pad", std::string("SAME_LOWER")},
                             {"strides", std::vector<int64_t>{3}}})),
              tt(DType::kUInt8, {1, 1, 3}));
    expect_error([&] { make_node(g, "MaxPool", {tt(F32, {1, 1, 9})}); }, ErrorKind::kInvalidModel,
                 "missing required attribute 'kernel_shape'");
    expect_error([&] { make_node(g, "MaxPool", {tt(F32, {1, 1, 9})}, {{"kernel_shape", std::vector<int64_t>{3, 3}}}); },
                 ErrorKind::kInvalidModel, "kernel_shape has 2 entries but X has 1 spatial dimensions");
    expect_error([&] { make_node(g, "MaxPool", {tt(DType::kInt32, {1, 1, 9})}, {{"kernel_shape", std::vector<int64_t>{3}}}); },
                 ErrorKind::kUnsupported, "does not support dtype i32");
    expect_error([&] { make_node(g, "GlobalAveragePool", {tt(F32, {2, 3})}); }, ErrorKind::kInvalidModel,
                 "must have rank >= 3");
}

TEST(Infer, BatchNormalization) {
    ir::Graph g;
    auto c = tt(F32, {3});
    EXPECT_EQ(out(make_node(g, "BatchNormalization", {tt(F32, {2, 3, 4, 4}), c, c, c, c})), tt(F32, {2, 3, 4, 4}));
    ir::Node* train = make_node(g, "BatchNormalization", {tt(F32, {2, 3, 4, 4}), c, c, c, tt(DType::kFloat64, {3})},
                                {{"training_mode", int64_t{1}}}, 3);
    EXPECT_EQ(out(train, 0), tt(F32, {2, 3, 4, 4}));
    EXPECT_EQ(out(train, 1), tt(F32, {3}));
    EXPECT_EQ(out(train, 2), tt(DType::kFloat64, {3}));
    expect_error([&] {
        make_node(g, "BatchNormalization", {tt(F32, {2, 3, 4, 4}), c, c, c, c}, {}, 3, {}, "bn");
    }, ErrorKind::kUnsupported, "BatchNormalization node 'bn': outputs running_mean / running_var exist only in training mode");
    expect_error([&] { make_node(g, "BatchNormalization", {tt(F32, {2, 4, 4, 4}), c, c, c, c}); }, ErrorKind::kInvalidModel,
                 "input scale must have shape [4], got [3]");
}

TEST(Infer, GemmAndMatMul) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Gemm", {tt(F32, {5, 3}), tt(F32, {4, 5}), tt(F32, {4})},
                            {{"transA", int64_t{1}}, {"transB", int64_t{1}}})),
              tt(F32, {3, 4}));
    expect_error([&] { make_node(g, "Gemm", {tt(F32, {3, 5}), tt(F32, {4, 5})}); }, ErrorKind::kInvalidModel,
                 "inner dimensions differ: A' has K=5 but B' has K=4");
    // A symbolic batch as M (a symbolic compile's classifier head), with and without transA.
    EXPECT_EQ(make_node(g, "Gemm", {tt(F32, {Dim::sym("N"), 5}), tt(F32, {4, 5}), tt(F32, {4})}, {{"transB", int64_t{1}}})
                  ->output(0)->type().str(),
              "f32[N,4]");
    EXPECT_EQ(make_node(g, "Gemm", {tt(F32, {5, Dim::sym("N")}), tt(F32, {5, 4})}, {{"transA", int64_t{1}}})
                  ->output(0)->type().str(),
              "f32[N,4]");
    expect_error([&] { make_node(g, "Gemm", {tt(F32, {3, 5}), tt(F32, {5, 4}), tt(F32, {2, 4})}); },
                 ErrorKind::kInvalidModel, "C of shape [2,4] does not broadcast to [3,4]");
    EXPECT_EQ(out(make_node(g, "MatMul", {tt(F32, {2, 1, 3, 4}), tt(F32, {5, 4, 6})})), tt(F32, {2, 5, 3, 6}));
    EXPECT_EQ(out(make_node(g, "MatMul", {tt(F32, {4}), tt(F32, {2, 4, 6})})), tt(F32, {2, 6}));
    EXPECT_EQ(out(make_node(g, "MatMul", {tt(F32, {3, 4}), tt(F32, {4})})), tt(F32, {3}));
    EXPECT_EQ(out(make_node(g, "MatMul", {tt(F32, {4}), tt(F32, {4})})), tt(F32, {}));
    EXPECT_EQ(out(make_node(g, "MatMul", {tt(F32, {Dim::sym("B"), 3, 4}), tt(F32, {4, 2})})),
              tt(F32, {Dim::sym("B"), 3, 2}));
    expect_error([&] { make_node(g, "MatMul", {tt(F32, {3, 4}), tt(F32, {5, 2})}, {}, 1, {}, "mm"); },
                 ErrorKind::kInvalidModel, "MatMul node 'mm': inner dimensions differ: A [3,4] and B [5,2]");
    expect_error([&] { make_node(g, "MatMul", {tt(F32, {2, 3, 4}), tt(F32, {3, 4, 2})}); }, ErrorKind::kInvalidModel,
                 "shapes [2] and [3] are not broadcastable");
}

TEST(Infer, SoftmaxArgMax) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Softmax", {tt(F32, {2, 5})})), tt(F32, {2, 5}));
    expect_error([&] { make_node(g, "Softmax", {tt(F32, {2, 5})}, {{"axis", int64_t{2}}}); }, ErrorKind::kInvalidModel,
                 "attribute axis=2 is out of range for rank 2");
    EXPECT_EQ(out(make_node(g, "ArgMax", {tt(F32, {2, 5, 3})}, {{"axis", int64_t{1}}})), tt(I64, {2, 1, 3}));
    EXPECT_EQ(out(make_node(g, "ArgMax", {tt(DType::kInt32, {2, 5, 3})}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}})),
              tt(I64, {2, 5}));
}

TEST(Infer, ShapeOps) {
    ir::Graph g;
    EXPECT_EQ(out(make_node(g, "Flatten", {tt(F32, {2, 3, 4})})), tt(F32, {2, 12}));
    EXPECT_EQ(out(make_node(g, "Flatten", {tt(F32, {2, 3, 4})}, {{"axis", int64_t{0}}})), tt(F32, {1, 24}));
    EXPECT_EQ(out(make_node(g, "Flatten", {tt(F32, {2, 3, 4})}, {{"axis", int64_t{-1}}})), tt(F32, {6, 4}));
    EXPECT_EQ(out(make_node(g, "Flatten", {tt(F32, {2, 3, 4})}, {{"axis", int64_t{3}}})), tt(F32, {24, 1}));
    EXPECT_EQ(out(make_node(g, "Reshape", {tt(F32, {2, 3, 4})}, {}, 1, {{1, int_tensor({4, -1})}})), tt(F32, {4, 6}));
    EXPECT_EQ(out(make_node(g, "Reshape", {tt(F32, {2, 3, 4})}, {}, 1, {{1, int_tensor({0, -1})}})), tt(F32, {2, 12}));
    EXPECT_EQ(out(make_node(g, "Reshape", {tt(F32, {Dim::sym("N"), 3})}, {}, 1, {{1, int_tensor({0, 3, 1})}})),
              tt(F32, {Dim::sym("N"), 3, 1}));
    EXPECT_EQ(out(make_node(g, "Reshape", {tt(F32, {0, 3})}, {{"allowzero", int64_t{1}}}, 1, {{1, int_tensor({3, 0})}})),
              tt(F32, {3, 0}));
    expect_error([&] { make_node(g, "Reshape", {tt(F32, {2, 3, 4})}, {}, 1, {{1, int_tensor({5, -1})}}, "r"); },
                 ErrorKind::kInvalidModel, "Reshape node 'r': cannot reshape 24 elements to [5,-1]");
    expect_error([&] { make_node(g, "Reshape", {tt(F32, {2, 3}), tt(I64, {2})}, {}, 1, {}, "r2"); },
                 ErrorKind::kUnsupported, "') must be a constant");
    EXPECT_EQ(out(make_node(g, "Transpose", {tt(F32, {2, 3, 4})})), tt(F32, {4, 3, 2}));
    EXPECT_EQ(out(make_node(g, "Transpose", {tt(F32, {2, 3, 4})}, {{"perm", std::vector<int64_t>{0, 2, 1}}})),
              tt(F32, {2, 4, 3}));
    expect_error([&] { make_node(g, "Transpose", {tt(F32, {2, 3, 4})}, {{"perm", std::vector<int64_t>{0, 0, 1}}}); },
                 ErrorKind::kInvalidModel, "perm is not a permutation");
    EXPECT_EQ(out(make_node(g, "Concat", {tt(I64, {2, 3}), tt(I64, {2, 1}), tt(I64, {2, 4})}, {{"axis", int64_t{-1}}})),
              tt(I64, {2, 8}));
    expect_error([&] { make_node(g, "Concat", {tt(F32, {2, 3}), tt(F32, {3, 3})}, {{"axis", int64_t{1}}}); },
                 ErrorKind::kInvalidModel, "shapes [2,3] and [3,3] differ outside axis 1");
}

}  // namespace
}  // namespace kiln::op::testing
